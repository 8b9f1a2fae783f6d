"""The PULL_MESSAGE lane: the common pulls of one socket read, served straight from its bytes.

A consumer's pulls arrive one per request (a push consumer keeps one in flight per queue, so a
read holds several when it consumes many queues, and pulls share reads with sends on a
producer-consumer connection). `Connection.data_received` offers each read's bytes to
`RequestTable.raw` (`chain_raw` of the send lane's and this lane's `raw`) before decoding it.
`PullLane.raw` takes the leading frames that are pulls on the common path and, for each, does
what `PullMessageProcessor.process` does, without a command, an ext dict, a header object or a
response command: the frame read in place (`speedups.read_raw_pull`: compiled, JSON or
ROCKETMQ), the checks against the broker's tables, the store read (`StoreAPI.get_message`, as the
processor reads), the piggy-backed commit offset, the stats (`record_get`), and the answer
frame's prefix and header written from its values (`speedups.encode_pull_found`), queued with the
store's slices behind it (`Connection.send_gather`: the body's only copy is the one write). It
returns where the frames it served end; the connection decodes the rest and serves them as
today, so pulls and the other requests of a read are answered in the order they came.

The common path, judged per request before anything is changed (a request that is not on it ends
the run; the handler serves it and gives the answer it gives today):
- the lane as a whole: compiled codecs (not under ROCKETLITE_NATIVE=0), no ACL or auth table and
  no request observer (the connection checks both), a master (a slave never moves consumers and
  answers otherwise), the broker readable, no server-side offset reset pending
  (`ResetOffsetGuard`);
- per request: a PULL_MESSAGE answered (not one-way) whose header reads (the compiled reader's
  spellings), no CLASS_FILTER flag, a group that exists (no auto-creation here) with
  consumeEnable, a topic that exists and is readable, a valid queue id, and a TAG subscription
  (by tag or "*"): carried in the request (SUBSCRIPTION flag) and already parsed by the
  processor (`parsed_subscription`: a consumer sends the same one every time, so only its first
  pull goes through the handler), or the group's registered one, as recent as the request's,
  not broadcast unless the group allows it; and the store read FOUND messages. A pull at or past
  the queue's end (a long-polling consumer's next pull, to be held) is left to the handler before
  the store is read; any other status (an offset moved, nothing matched) after it, and the
  handler reads again and answers it (the store read has no side effect).
`tests/broker/processors/test_pull_lane.py` pins the answer frames, the stored consumer offsets
and the stats against the per-request path.
"""

from __future__ import annotations

from rocketlite.broker.processors.pull import PullMessageProcessor
from rocketlite.protocol import perm
from rocketlite.protocol.bodies.heartbeat import MessageModel, SubscriptionData
from rocketlite.protocol.codes import PullSysFlag
from rocketlite.protocol.reserved import MASTER_ID
from rocketlite.protocol.subscription import is_tag_type, tag_codes
from rocketlite.protocol.wire.speedups import encode_pull_found, read_raw_pull
from rocketlite.remoting.connection import Connection
from rocketlite.store.api import MessageFilter
from rocketlite.store.results import GetMessageStatus

_FOUND = GetMessageStatus.FOUND
_SUBSCRIPTION = int(PullSysFlag.SUBSCRIPTION)
_COMMIT_OFFSET = int(PullSysFlag.COMMIT_OFFSET)
_CLASS_FILTER = int(PullSysFlag.CLASS_FILTER)
_BROADCASTING = MessageModel.BROADCASTING
_READ = perm.PERM_READ
_FILTERS_MAX = 4096  # subscriptions whose tag filter is kept; beyond, the cache starts over


class PullLane:
    """`RequestTable.raw`'s pull half (see the module's docstring)."""

    def __init__(self, processor: PullMessageProcessor) -> None:
        self.processor = processor
        self.taken = 0  # pulls served by the lane (tests, diagnostics)
        # a subscription's tag filter, by the subscription's identity (a `SubscriptionData` is
        # frozen: the same object gives the same filter)
        self._filters: dict[int, tuple[SubscriptionData, MessageFilter | None]] = {}

    def _open(self) -> bool:
        p = self.processor
        b = p.broker
        return bool(b.broker_permission & _READ) and not b.is_slave and not p.offsets.reset_table

    def _filter(self, sub: SubscriptionData) -> MessageFilter | None:
        hit = self._filters.get(id(sub))
        if hit is not None and hit[0] is sub:
            return hit[1]
        codes = tag_codes(sub)
        flt = codes.__contains__ if codes is not None else None
        if len(self._filters) >= _FILTERS_MAX:
            self._filters.clear()
        self._filters[id(sub)] = (sub, flt)
        return flt

    def raw(self, conn: Connection, src: bytes, pos: int) -> int:
        """Serve the leading frames of `src[pos:]` that are pulls on the common path; returns the
        position after the last one served (`pos`: none)."""
        if not self._open():
            return pos
        p = self.processor
        groups, topics, clients, store = p.groups.table, p.topics.table, p.clients, p.store
        broker, parsed_subscription = p.broker, p.parsed_subscription
        max_frame = conn.decoder.max_frame_length
        served = 0
        while True:
            ask = read_raw_pull(src, pos, max_frame)
            if ask is None:
                break
            end, opaque, serialize, group, topic, qid, qoff, nums, sys_flag, commit, expr, version, kind = ask
            if sys_flag & _CLASS_FILTER:
                break
            cfg = groups.get(group)
            if cfg is None or not cfg.consume_enable:
                break
            tc = topics.get(topic)
            if tc is None or not tc.perm & _READ or not 0 <= qid < tc.read_queue_nums:
                break
            if sys_flag & _SUBSCRIPTION:
                parsed = parsed_subscription(group, topic, expr, kind, version)
                if parsed is None or parsed[1] is not None:
                    break  # parsed (or refused) by the handler first; an SQL92 filter
                sub = parsed[0]
            else:
                info = clients.consumer_group(group)
                if info is None or (not cfg.consume_broadcast_enable and info.message_model is _BROADCASTING):
                    break
                found = info.subscription_table.get(topic)
                if found is None or found.sub_version < version or not is_tag_type(found.expression_type):
                    break
                sub = found
            if qoff >= store.get_max_offset_in_queue(topic, qid):
                break  # nothing to find (a long-polling consumer's next pull): held by the handler
            result = store.get_message(group, topic, qid, qoff, nums, self._filter(sub))
            if result.status is not _FOUND:
                result.release()
                break  # the handler reads it again and answers (a hold, an offset moved, ...)
            # taken: from here on it is served
            if sys_flag & _COMMIT_OFFSET:
                p.offsets.commit(group, topic, qid, commit)
            next_begin = result.next_begin_offset
            suggest = p.suggest_broker(cfg, result) if broker.slave_read_enable else MASTER_ID
            parts = result.parts
            size = result.buffer_total_size
            p.stats.record_get(group, result.message_count, topic, qid, next_begin, size)
            body = sum(map(len, parts))
            head = encode_pull_found(
                opaque, serialize, suggest, next_begin, result.min_offset, result.max_offset, body
            )
            conn.send_gather(head, parts)
            served += 1
            pos = end
        self.taken += served
        return pos
