"""Client membership: HEART_BEAT (34) and UNREGISTER_CLIENT (35).

A heartbeat's body (`HeartbeatData`) names the client id and every producer and consumer group of
the client, consumers with their subscriptions; the broker keeps them for rebalancing and
transaction checks. The answer's `version` is the broker's (`MQVersion` ordinal), which clients
remember per address. Which brokers get a heartbeat, and how often, is the client's policy.
"""

from __future__ import annotations

from rocketlite.protocol.bodies.heartbeat import HeartbeatData
from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.requests.response import expect
from rocketlite.protocol.wire.command import RemotingCommand, make_request
from rocketlite.protocol.wire.headers import UnregisterClientRequestHeader


def build_heartbeat(data: HeartbeatData) -> RemotingCommand:
    return make_request(RequestCode.HEART_BEAT, body=data.to_bytes())


def parse_heartbeat(response: RemotingCommand) -> int:
    """The broker's version; `ResponseError` when the broker refused the heartbeat."""
    expect(response, RequestCode.HEART_BEAT)
    return response.version


def build_unregister_client(
    client_id: str, *, producer_group: str | None = None, consumer_group: str | None = None
) -> RemotingCommand:
    header = UnregisterClientRequestHeader(
        client_id=client_id, producer_group=producer_group, consumer_group=consumer_group
    )
    return make_request(RequestCode.UNREGISTER_CLIENT, header.to_ext())


def parse_unregister_client(response: RemotingCommand) -> None:
    expect(response, RequestCode.UNREGISTER_CLIENT)
