"""Master/slave replication, wired into the broker by `brokerRole` (installed after live_config).

* ASYNC_MASTER / SYNC_MASTER (brokerId 0): `HAMasterService` on `haListenPort` (listenPort + 1 by
  default; an ephemeral port when listenPort is 0), woken by the dispatcher when records arrive.
  A SYNC_MASTER's send processor awaits `wait_replicated` after the flush (FLUSH_SLAVE_TIMEOUT,
  SLAVE_NOT_AVAILABLE). The bound port is what the broker registers as its haServerAddr.
* SLAVE (brokerId >= 1): `HASlaveService` (the replication thread) learns the master's HA address
  from `haMasterAddress` or from the name server's register answers; `SlaveSynchronize` copies the
  master's config files. A slave its master refuses (diverged log) sets brokerPermission to 0 —
  it answers NO_PERMISSION to pulls and registers its topics with no permission — rather than
  serve bytes that are not the master's.

See ha_protocol (wire format), ha_master, ha_slave and ha_sync.
"""

from __future__ import annotations

from rocketlite.broker.config import BrokerRole
from rocketlite.broker.context import BrokerContext, BrokerService
from rocketlite.broker.ha.master import HAMasterService, bind_ha_socket
from rocketlite.broker.ha.slave import HASlaveService
from rocketlite.broker.ha.sync import SlaveSynchronize, TopicLearner
from rocketlite.remoting.connection import RequestTable


def ha_listen_port(configured: int, listen_port: int, bound_port: int) -> int:
    """`haListenPort`, or listenPort + 1 (RocketMQ's default); 0 (ephemeral) for an ephemeral broker."""
    if configured:
        return configured
    return bound_port + 1 if listen_port else 0


def install(ctx: BrokerContext, table: RequestTable) -> list[BrokerService]:
    del table  # the HA port speaks its own protocol, not remoting
    b = ctx.broker
    if b.is_slave:
        live = ctx.live

        def refused(reason: str) -> None:
            if live is not None:
                ctx.loop.call_soon_threadsafe(
                    live.set_broker_permission, 0, f"diverged from the master: {reason}"
                )

        slave = HASlaveService(ctx.store, b, on_refused=refused, request_register=ctx.request_register)
        ctx.register_listeners.append(slave.on_register_result)
        if live is not None:
            live.listeners.append(slave.on_config_change)
        sync = SlaveSynchronize(
            ctx.outbound,
            ctx.topics,
            ctx.groups,
            ctx.offsets,
            ctx.store_config.config_dir,
            lambda: slave.master_addr,
            on_topics_changed=ctx.request_register,
        )
        ctx.store.add_arrival_listener(TopicLearner(ctx.topics, b.default_topic_queue_nums))
        ctx.ha_slave = slave
        ctx.slave_sync = sync
        return [slave, sync]
    port = ha_listen_port(b.ha_listen_port, b.listen_port, ctx.store_host.port)
    master = HAMasterService(ctx.store, b, bind_ha_socket(b.listen_host, port), ctx.loop)
    ctx.ha_port = master.port
    ctx.store.add_arrival_listener(master.on_dispatch)
    if b.broker_role is BrokerRole.SYNC_MASTER and ctx.send is not None:
        ctx.send.replica = master
    ctx.ha_master = master
    return [master]
