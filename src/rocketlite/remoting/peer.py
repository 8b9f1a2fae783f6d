"""`Peer`: the other end of a request, as the broker's typed request cores see it, whichever port
the request came in on.

A core (a send's `put`, a POP's `pop`, an END_TRANSACTION) needs little of who asked: the address
(for logs and the born host of what it stores), the client's id when it is known, a small memo
kept with the peer (`attrs`: the parsed born host, close hooks), whether it is still there, and a
way to send the client a request of the broker's own (`push`). A remoting `Connection` is a
`Peer`; so is a 5.x gRPC client (`broker/grpc/kit.py`'s `GrpcPeer`, the channel the client
manager keeps for it, its Telemetry stream). Nothing in a core needs to know which.

What the broker pushes is a typed value, not a 4.x command, so each port carries it in its own
form (`Push`):

- `TransactionCheck`: ask a producer how a half message ended. A `Connection` sends a one-way
  CHECK_TRANSACTION_STATE (the header, the record re-encoded as its body: `check_command`); a 5.x
  Telemetry stream a `RecoverOrphanedTransactionCommand` built from the same record.
- `ConsumerIdsChanged`: a consumer group changed; a `Connection` sends a one-way
  NOTIFY_CONSUMER_IDS_CHANGED. A 5.x client pops instead of rebalancing, so its stream drops it (as
  Java's proxy does).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.formats.record import MessageInner, StoredRecord, encode_record
from rocketlite.protocol.wire.command import RemotingCommand, make_request
from rocketlite.protocol.wire.headers import (
    CheckTransactionStateRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
)

__all__ = ["ConsumerIdsChanged", "Peer", "Push", "TransactionCheck", "check_command", "push_command"]


@dataclass(frozen=True, slots=True)
class TransactionCheck:
    """A half message's producer is asked for its outcome. `record` is the half as the producer
    sent it: its real topic and queue, its properties with TRANSACTION_CHECK_TIMES (what Java's
    broker writes into the check)."""

    header: CheckTransactionStateRequestHeader
    record: StoredRecord


@dataclass(frozen=True, slots=True)
class ConsumerIdsChanged:
    """The clients or subscriptions of consumer `group` changed: its clients rebalance now."""

    group: str


Push = TransactionCheck | ConsumerIdsChanged


class Peer(Protocol):
    """Who sent a request (see the module doc): a remoting `Connection` or a 5.x gRPC client."""

    @property
    def remote_address(self) -> str:
        """`host:port` of the client, as logs and the born host show it."""
        ...

    @property
    def client_id(self) -> str:
        """The client's id (its heartbeat's clientID, a 5.x client's `x-mq-client-id`); "" until
        the client has said it."""
        ...

    @property
    def attrs(self) -> dict[str, Any]:
        """A memo kept with the peer for as long as it is there (the parsed born host, hooks)."""
        ...

    @property
    def closed(self) -> bool:
        """The client went away: nothing pushed to it arrives."""
        ...

    def push(self, request: Push) -> None:
        """Send the client a request of the broker's (one-way); dropped when the client's port has
        no form for it, or the client is gone."""
        ...


def check_command(check: TransactionCheck) -> RemotingCommand:
    """CHECK_TRANSACTION_STATE (39) for a remoting producer: the header, and the half as a record
    of the commit-log layout in the body (Java's `sendCheckMessage` writes the same)."""
    r = check.record
    body = encode_record(
        MessageInner(
            topic=r.topic,
            body=r.body,
            born_host=r.born_host,
            store_host=r.store_host,
            queue_id=r.queue_id,
            flag=r.flag,
            sys_flag=r.sys_flag,
            born_timestamp=r.born_timestamp,
            reconsume_times=r.reconsume_times,
            prepared_transaction_offset=r.prepared_transaction_offset,
            properties_string=r.properties_string,
            store_timestamp=r.store_timestamp,
            queue_offset=r.queue_offset,
            commit_log_offset=r.physical_offset,
        )
    )
    return make_request(RequestCode.CHECK_TRANSACTION_STATE, check.header.to_ext(), body)


def push_command(request: Push) -> RemotingCommand:
    """A push as the one-way request a remoting client reads."""
    if isinstance(request, TransactionCheck):
        return check_command(request)
    ext = NotifyConsumerIdsChangedRequestHeader(consumer_group=request.group).to_ext()
    return make_request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, ext)
