"""The operator's requests a broker relays to consumers, sent as mqadmin sends them: each on its own
connection to the broker, answered by the broker (and, through it, by the client)."""

from __future__ import annotations

from rocketlite.embedded import EmbeddedCluster
from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.wire.admin import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    ResetOffsetRequestHeader,
)
from rocketlite.protocol.wire.command import RemotingCommand
from tests.support.wire import raw_request

RELAY_TIMEOUT_S = 15.0  # the broker gives a client 10 s to answer


def reset_offset(
    cluster: EmbeddedCluster, group: str, topic: str, timestamp: int, *, force: bool = True
) -> RemotingCommand:
    """INVOKE_BROKER_TO_RESET_OFFSET (222), as `resetOffsetByTime` sends it (-1: to the end)."""
    ext = ResetOffsetRequestHeader(group=group, topic=topic, timestamp=timestamp, is_force=force).to_ext()
    return raw_request(cluster.broker_addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, ext)


def running_info(
    cluster: EmbeddedCluster, group: str, client_id: str, *, jstack: bool = False
) -> RemotingCommand:
    """GET_CONSUMER_RUNNING_INFO (307), relayed to the client."""
    ext = GetConsumerRunningInfoRequestHeader(
        consumer_group=group, client_id=client_id, jstack_enable=jstack
    ).to_ext()
    return raw_request(cluster.broker_addr, RequestCode.GET_CONSUMER_RUNNING_INFO, ext, RELAY_TIMEOUT_S)


def consume_directly(
    cluster: EmbeddedCluster, group: str, client_id: str, offset_msg_id: str, topic: str
) -> RemotingCommand:
    """CONSUME_MESSAGE_DIRECTLY (309): the stored message handed to the client's listener."""
    ext = ConsumeMessageDirectlyResultRequestHeader(
        consumer_group=group, client_id=client_id, msg_id=offset_msg_id, topic=topic
    ).to_ext()
    return raw_request(cluster.broker_addr, RequestCode.CONSUME_MESSAGE_DIRECTLY, ext, RELAY_TIMEOUT_S)
