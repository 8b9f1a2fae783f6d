"""GET_BROKER_HA_STATUS (907, mqadmin haStatus): replication as RocketMQ's `HARuntimeInfo` shows it.

A master lists its accepted slaves: the offset each acknowledged, how far behind the master's
commit log it is, and whether that is within `haMaxGapNotInSync` (in sync); a slave names its
master and its own commit log's end. Figures the HA services do not keep (bytes per second, the
last read and write times) are 0.
"""

from __future__ import annotations

from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.ha.master import HAMasterService
from rocketlite.broker.ha.slave import HASlaveService
from rocketlite.protocol.bodies.admin import HAClientRuntimeInfo, HAConnectionRuntimeInfo, HARuntimeInfo


def ha_runtime_info(
    config: BrokerConfig, max_offset: int, master: HAMasterService | None, slave: HASlaveService | None
) -> HARuntimeInfo | None:
    """The broker's HA status; None when it has neither HA service."""
    if master is not None:
        slaves = [
            HAConnectionRuntimeInfo(
                c.peer,
                max(c.acked_offset, 0),
                max(max_offset - c.acked_offset, 0),
                max_offset - c.acked_offset < config.ha_max_gap_not_in_sync,
                transfer_from_where=max(c.next_offset, 0),
            )
            for c in sorted(master.accepted_slaves, key=lambda c: c.peer)
        ]
        return HARuntimeInfo(True, max_offset, sum(s.in_sync for s in slaves), tuple(slaves))
    if slave is not None:
        client = HAClientRuntimeInfo(slave.master_ha_addr, max_offset, activated=slave.connected)
        return HARuntimeInfo(False, ha_client_runtime_info=client)
    return None
