"""PULL_MESSAGE (11): RocketMQ's `PullMessageProcessor.processRequest`, with long polling.

Checks run in Java's order, each with Java's answer: broker not readable (NO_PERMISSION), group
unknown and not auto-created (SUBSCRIPTION_GROUP_NOT_EXIST), group consumeEnable off
(NO_PERMISSION), topic unknown (TOPIC_NOT_EXIST), topic not readable (NO_PERMISSION), queueId out
of range (SYSTEM_ERROR), then the subscription: from the request when the SUBSCRIPTION sysFlag is
set (pull consumers, ali-ons), otherwise from the group's heartbeat (SUBSCRIPTION_NOT_EXIST /
SUBSCRIPTION_NOT_LATEST).

SQL92 subscriptions (docs/sql92.md): one carried in the request is compiled here (once per
group, topic, expression and version); a heartbeat's is the group's `ConsumerFilterData`
(`consumer_filter.py`; none: FILTER_DATA_NOT_EXIST, an older version than the pull's:
FILTER_DATA_NOT_LATEST). Without `enablePropertyFilter` either is refused with SYSTEM_ERROR "The
broker does not support consumer to filter message by SQL92", as RocketMQ refuses it. An empty or
malformed expression, or an expression type other than TAG and SQL92, in the request is
SUBSCRIPTION_PARSE_FAILED; the remark names the error. (RocketMQ 5.3.3 answers these with every
message, unfiltered: its filter data is null when the expression does not compile, and a null
filter matches everything. docs/internals/differential.md lists the difference.)

The store read filters consume-queue units by tag code and, for SQL92, each record the tag codes
let through by its properties (the store's `RecordFilter`); its status maps to a response code
(table below). Every status answer carries all four header fields (the Java client unboxes them,
ali-ons calls `.toString()` on them); the remark is the status name. A FOUND body goes out as the
store's zero-copy slices through `Connection.send_parts`.

A 19 with the SUSPEND flag on the first execution is parked in `PullRequestHoldService` (see
`pull_hold.py`; an SQL92 pull is woken only by a message its expression takes, or its timeout);
a re-run there never parks again and always answers, on the original opaque.
The re-run runs every check again but reuses what cannot have changed: the decoded header, and
the subscription parsed from it (parsed subscriptions are kept by expression, since a consumer
sends the same one on every pull, so a long-polling consumer parses it once, not twice a message).
The piggy-backed commitOffset (COMMIT_OFFSET flag) is stored on the first execution only, never on
a slave.

suggestWhichBrokerId (RocketMQ 4.x): the master (0) unless `slaveReadEnable`; with it, the group's
`whichBrokerWhenConsumeSlowly` when the last record pulled lies further behind the end of the log
than `accessMessageInMemoryMaxRatio` % of physical memory (no longer in page cache: let the slave
serve it), else the group's `brokerId`. A slave serves every pull it gets (clients come to it when
the master is gone).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from typing import Final

from rocketlite.broker.client_manager import FAQ_SUFFIX, ClientManager
from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.consumer_filter import (
    ConsumerFilterManager,
    compile_expression,
    record_matcher,
    retry_group,
    retry_matcher,
)
from rocketlite.broker.processors.pull_hold import HeldPull, PullRequestHoldService
from rocketlite.broker.state_files import ConsumerOffsetTable
from rocketlite.broker.stats import BrokerStats
from rocketlite.broker.subscription_group import SubscriptionGroupConfig, SubscriptionGroupManager
from rocketlite.broker.topic_config import TopicConfigManager
from rocketlite.protocol import perm
from rocketlite.protocol.bodies.heartbeat import MessageModel, SubscriptionData
from rocketlite.protocol.codes import PullSysFlag, ResponseCode
from rocketlite.protocol.errors import RocketliteError
from rocketlite.protocol.formats.record import LONG, PHYSICAL_OFFSET_POS
from rocketlite.protocol.reserved import MASTER_ID
from rocketlite.protocol.subscription import build_subscription_data, is_tag_type, tag_codes
from rocketlite.protocol.wire.command import RemotingCommand, make_response
from rocketlite.protocol.wire.headers import PullMessageRequestHeader
from rocketlite.protocol.wire.pop import PopRequestCode
from rocketlite.protocol.wire.speedups import decode_pull_header
from rocketlite.remoting.connection import RESULT_SUCCESS, RESULT_WRITE_FAILED, Connection, error_response
from rocketlite.store.api import MessageFilter, RecordFilter, StoreAPI
from rocketlite.store.results import GetMessageResult, GetMessageStatus

log = logging.getLogger("rocketlite.broker.pull")


_PHYSICAL_MEMORY = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")

# GetMessageStatus -> response code. NO_MESSAGE_IN_QUEUE / NO_MATCHED_LOGIC_QUEUE depend on the
# request offset (19 at offset 0, else 21) and are handled in `_code_for`.
_STATUS_CODES: dict[GetMessageStatus, ResponseCode] = {
    GetMessageStatus.FOUND: ResponseCode.SUCCESS,
    GetMessageStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
}
_EMPTY_QUEUE = (GetMessageStatus.NO_MESSAGE_IN_QUEUE, GetMessageStatus.NO_MATCHED_LOGIC_QUEUE)
_FOUND: Final = GetMessageStatus.FOUND
_MASTER: Final = str(MASTER_ID)
_SUCCESS: Final = int(ResponseCode.SUCCESS)
_PULL_NOT_FOUND: Final = int(ResponseCode.PULL_NOT_FOUND)
_PULL_OFFSET_MOVED: Final = int(ResponseCode.PULL_OFFSET_MOVED)
# Subscriptions parsed from requests (with the compiled SQL92 filter, if any), by (group, topic,
# expression, type, version): a consumer sends the same one on every pull, and `SubscriptionData`
# is frozen. Cleared when it grows past this size.
_PARSED_SUBSCRIPTIONS: Final = 4096
_ParsedKey = tuple[str, str, str | None, str | None, int]
# a subscription as `process` parsed it: the data and its compiled SQL92 filter (None for tags)
ParsedSubscription = tuple[SubscriptionData, RecordFilter | None]


def _code_for(status: GetMessageStatus, request_offset: int) -> ResponseCode:
    if status in _EMPTY_QUEUE:
        return ResponseCode.PULL_NOT_FOUND if request_offset == 0 else ResponseCode.PULL_OFFSET_MOVED
    return _STATUS_CODES[status]


def _refuse(code: ResponseCode, remark: str) -> RocketliteError:
    return RocketliteError(remark, code=code)


class PullMessageProcessor:
    """Serves PULL_MESSAGE; owns the hold service it parks pulls in.

    The hold service is built here because it re-runs pulls through this processor (`wake`); the
    controller starts and stops it (`hold`) and feeds it the store's arrivals (`hold.on_arrival`).
    Its check interval is `longPollingCheckIntervalMs` with long polling, else
    `shortPollingTimeMills`.
    """

    def __init__(
        self,
        broker: BrokerConfig,
        store: StoreAPI,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        clients: ClientManager,
        offsets: ConsumerOffsetTable,
        stats: BrokerStats,
        loop: asyncio.AbstractEventLoop,
        filters: ConsumerFilterManager,
        answer_reset: Callable[[RemotingCommand], RemotingCommand | None] | None = None,
    ) -> None:
        self.broker = broker
        # a server-side offset reset pending on the queue answers a re-run held pull first
        # (`ResetOffsetGuard.answer_reset`; a first execution meets the same guard at dispatch)
        self.answer_reset = answer_reset
        self.filters = filters
        self.store = store
        self.topics = topics
        self.groups = groups
        self.clients = clients
        self.offsets = offsets
        self.stats = stats
        self._parsed: dict[_ParsedKey, ParsedSubscription] = {}
        interval_ms = (
            broker.long_polling_check_interval_ms
            if broker.long_polling_enable
            else broker.short_polling_time_mills
        )
        self.hold = PullRequestHoldService(store, loop, self.wake, check_interval_s=interval_ms / 1000)

    # -- entry points -----------------------------------------------------------------------
    def handle(self, conn: Connection, request: RemotingCommand) -> RemotingCommand | None:
        """First execution: may park the pull (no answer now) and may commit the offset. A 5.x
        LITE_PULL_MESSAGE (361) is the same request under another code, refused as RocketMQ 5
        refuses it when `litePullMessageEnable` is false."""
        if request.code == PopRequestCode.LITE_PULL_MESSAGE and not self.broker.lite_pull_message_enable:
            raise _refuse(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.broker.broker_ip1}] for lite pull consumer is forbidden",
            )
        return self.process(conn, request, allow_suspend=True)

    def wake(self, held: HeldPull) -> None:
        """Re-run a held pull without suspend and answer it on its connection (original opaque)."""
        conn, request = held.conn, held.request
        if conn.closed:
            return
        conn.answered_code = None
        try:
            response = self.answer_reset(request) if self.answer_reset is not None else None
            if response is None:
                response = self.process(conn, request, allow_suspend=False, header=held.header)
        except Exception as exc:
            if not isinstance(exc, RocketliteError):
                log.exception("re-running a held pull failed")
            response = error_response(request, exc)
        if response is not None:
            conn.send(response)
        observer = conn.table.observer
        code = response.code if response is not None else conn.answered_code
        if observer is not None and code is not None:
            result = RESULT_WRITE_FAILED if conn.closed else RESULT_SUCCESS
            observer(request.code, code, (time.perf_counter() - held.held_at) * 1000, True, result)

    # -- the request ------------------------------------------------------------------------
    def _check_group(self, group: str) -> SubscriptionGroupConfig:
        if not perm.is_readable(self.broker.broker_permission):
            raise _refuse(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.broker.broker_ip1}] pulling message is forbidden",
            )
        cfg = self.groups.find(group)
        if cfg is None:
            raise _refuse(
                ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                f"subscription group [{group}] does not exist,{FAQ_SUFFIX}",
            )
        if not cfg.consume_enable:
            raise _refuse(ResponseCode.NO_PERMISSION, f"subscription group no permission, {group}")
        return cfg

    def _check_topic(self, header: PullMessageRequestHeader, remote: str) -> None:
        tc = self.topics.select(header.topic)
        if tc is None:
            log.error("pull from %s: topic %s does not exist", remote, header.topic)
            raise _refuse(
                ResponseCode.TOPIC_NOT_EXIST,
                f"topic[{header.topic}] not exist, apply first please!{FAQ_SUFFIX}",
            )
        if not perm.is_readable(tc.perm):
            raise _refuse(
                ResponseCode.NO_PERMISSION, f"the topic[{header.topic}] pulling message is forbidden"
            )
        if header.queue_id < 0 or header.queue_id >= tc.read_queue_nums:
            raise _refuse(
                ResponseCode.SYSTEM_ERROR,
                f"queueId[{header.queue_id}] is illegal, topic:[{header.topic}] "
                f"topicConfig.readQueueNums:[{tc.read_queue_nums}] consumer:[{remote}]",
            )

    def _subscription(
        self, header: PullMessageRequestHeader, cfg: SubscriptionGroupConfig
    ) -> ParsedSubscription:
        """From the request (SUBSCRIPTION flag) or from the group's heartbeat, with the SQL92
        filter of a subscription that is not a tag expression."""
        if header.sys_flag & PullSysFlag.SUBSCRIPTION:
            sub, flt = self._from_request(header)
        else:
            sub, flt = self._registered(header, cfg)
        if flt is not None and self.broker.filter_support_retry:
            group = retry_group(header.topic)
            if group is not None:
                flt = retry_matcher(self.filters, group)
        return sub, flt

    def parsed_subscription(
        self, group: str, topic: str, expression: str | None, kind: str | None, version: int
    ) -> ParsedSubscription | None:
        """What a pull carrying this subscription (SUBSCRIPTION flag) was parsed into here, or
        None when none has been (or its parse was refused); a lookup, never a parse. The pull
        lane serves from a read's bytes only subscriptions this processor already parsed, so a
        parse, and the answer to one that fails, always happen here."""
        return self._parsed.get((group, topic, expression, kind, version))

    def _from_request(self, header: PullMessageRequestHeader) -> ParsedSubscription:
        key = (
            header.consumer_group, header.topic, header.subscription, header.expression_type,
            header.sub_version,
        )  # fmt: skip
        parsed = self._parsed.get(key)
        if parsed is not None:
            if parsed[1] is not None:
                self._check_property_filter(parsed[0])
            return parsed
        expression, kind = header.subscription, header.expression_type
        try:
            sub = build_subscription_data(header.topic, expression, kind, header.sub_version)
            if not is_tag_type(kind) and not expression:
                raise ValueError(f"Expression can't be null! {kind}")
        except ValueError as exc:
            log.warning("cannot parse subscription %r: %s", expression, exc)
            raise _refuse(
                ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed"
            ) from exc
        flt: RecordFilter | None = None
        if not is_tag_type(sub.expression_type):
            self._check_property_filter(sub)
            try:
                flt = record_matcher(compile_expression(sub.expression_type, sub.sub_string))
            except RocketliteError as exc:
                log.warning("group %s: %s", header.consumer_group, exc)
                raise _refuse(
                    ResponseCode.SUBSCRIPTION_PARSE_FAILED,
                    f"parse the consumer's subscription failed: {exc}",
                ) from exc
        if len(self._parsed) >= _PARSED_SUBSCRIPTIONS:
            self._parsed.clear()
        parsed = self._parsed[key] = (sub, flt)
        return parsed

    def _registered(
        self, header: PullMessageRequestHeader, cfg: SubscriptionGroupConfig
    ) -> ParsedSubscription:
        group = header.consumer_group
        info = self.clients.consumer_group(group)
        if info is None:
            raise _refuse(
                ResponseCode.SUBSCRIPTION_NOT_EXIST, f"the consumer's group info not exist{FAQ_SUFFIX}"
            )
        if not cfg.consume_broadcast_enable and info.message_model is MessageModel.BROADCASTING:
            raise _refuse(
                ResponseCode.NO_PERMISSION,
                f"the consumer group[{group}] can not consume by broadcast way",
            )
        sub = info.subscription_table.get(header.topic)
        if sub is None:
            raise _refuse(
                ResponseCode.SUBSCRIPTION_NOT_EXIST, f"the consumer's subscription not exist{FAQ_SUFFIX}"
            )
        if sub.sub_version < header.sub_version:
            raise _refuse(ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest")
        if is_tag_type(sub.expression_type):
            return sub, None
        data = self.filters.get(header.topic, group)
        if data is None:
            raise _refuse(
                ResponseCode.FILTER_DATA_NOT_EXIST,
                "The broker's consumer filter data is not exist!Your expression may be wrong!",
            )
        if data.client_version < header.sub_version:
            raise _refuse(
                ResponseCode.FILTER_DATA_NOT_LATEST, "the consumer's consumer filter data not latest"
            )
        self._check_property_filter(sub)
        return sub, data.matcher

    def _check_property_filter(self, sub: SubscriptionData) -> None:
        if not self.broker.enable_property_filter:
            raise _refuse(
                ResponseCode.SYSTEM_ERROR,
                f"The broker does not support consumer to filter message by {sub.expression_type}",
            )

    def _probe(
        self, header: PullMessageRequestHeader, tags: MessageFilter | None, flt: RecordFilter
    ) -> Callable[[int, int], bool]:
        """Whether queue offsets [start, end) hold a message the held SQL92 pull takes."""
        store, group, topic, queue_id = self.store, header.consumer_group, header.topic, header.queue_id

        def probe(start: int, end: int) -> bool:
            while start < end:
                r = store.get_message(group, topic, queue_id, start, 1, tags, record_filter=flt)
                found = r.status is _FOUND
                r.release()
                if found:
                    return True
                if r.next_begin_offset <= start:
                    return False
                start = r.next_begin_offset
            return False

        return probe

    def suggest_broker(self, cfg: SubscriptionGroupConfig, result: GetMessageResult) -> int:
        """Which broker of the group the client should pull from next (see the module doc).
        Public because the pull lane (`pull_lane.py`) answers a pull it serves with the same
        suggestion as this processor."""
        b = self.broker
        if not b.slave_read_enable:
            return MASTER_ID
        last = result.last_message()
        if last is not None and len(last) >= PHYSICAL_OFFSET_POS + 8:
            phys = LONG.unpack_from(last, PHYSICAL_OFFSET_POS)[0]
            in_memory = _PHYSICAL_MEMORY * b.access_message_in_memory_max_ratio / 100
            if self.store.max_phy_offset - phys > in_memory:
                return cfg.which_broker_when_consume_slowly
        return cfg.broker_id

    def process(
        self,
        conn: Connection,
        request: RemotingCommand,
        *,
        allow_suspend: bool,
        header: PullMessageRequestHeader | None = None,
    ) -> RemotingCommand | None:
        """Run the pull; returns the answer to send, or None when the answer was sent zero-copy or
        the pull was parked. Refusals raise `RocketliteError` carrying their code. A re-run of a
        held pull passes the header decoded the first time (every check still runs again)."""
        if header is None:
            header = decode_pull_header(request.ext_fields)  # compiled; PullMessageRequestHeader's rules
        cfg = self._check_group(header.consumer_group)
        self._check_topic(header, conn.remote_address)
        sub, record_filter = self._subscription(header, cfg)
        codes = tag_codes(sub) if not header.sys_flag & PullSysFlag.CLASS_FILTER else None
        message_filter = codes.__contains__ if codes is not None else None
        result = self.store.get_message(
            header.consumer_group, header.topic, header.queue_id, header.queue_offset,
            header.max_msg_nums, message_filter, record_filter=record_filter,
        )  # fmt: skip
        status = result.status
        if status is _FOUND:  # the common answer, without the status tables
            code, next_begin = _SUCCESS, result.next_begin_offset
        else:
            code, next_begin = int(_code_for(status, header.queue_offset)), result.next_begin_offset
            if code == _PULL_OFFSET_MOVED and self.broker.is_slave:
                # A slave does not move consumers (offsetCheckInSlave off): retry at the same offset.
                code, next_begin = int(ResponseCode.PULL_RETRY_IMMEDIATELY), header.queue_offset
            if code == _PULL_OFFSET_MOVED:
                log.info(
                    "pull offset moved: group %s %s:%d offset %d -> %d (%s)",
                    header.consumer_group, header.topic, header.queue_id, header.queue_offset,
                    next_begin, status.name,
                )  # fmt: skip
        sys_flag = header.sys_flag
        if allow_suspend and sys_flag & PullSysFlag.COMMIT_OFFSET and not self.broker.is_slave:
            self.offsets.commit(header.consumer_group, header.topic, header.queue_id, header.commit_offset)
        if code == _PULL_NOT_FOUND and allow_suspend and sys_flag & PullSysFlag.SUSPEND:
            # Parked: the answer is built when the pull is re-run (a consumer's next pull after
            # each message lands here, so nothing is built for it now).
            b = self.broker
            timeout_ms = (
                header.suspend_timeout_millis if b.long_polling_enable else b.short_polling_time_mills
            )
            held = HeldPull(
                conn, request, header.topic, header.queue_id, header.queue_offset, codes,
                seen_max=max(result.max_offset, header.queue_offset), header=header,
                probe=self._probe(header, message_filter, record_filter) if record_filter else None,
            )  # fmt: skip
            self.hold.suspend(held, timeout_ms / 1000)
            return None
        # PullMessageResponseHeader.to_ext, written out (same keys, same order)
        ext = {
            "suggestWhichBrokerId": (
                str(self.suggest_broker(cfg, result)) if self.broker.slave_read_enable else _MASTER
            ),
            "nextBeginOffset": str(next_begin),
            "minOffset": str(result.min_offset),
            "maxOffset": str(result.max_offset),
        }
        response = make_response(request, code, status.name, ext)
        if code == _SUCCESS:
            self.stats.record_get(
                header.consumer_group, result.message_count, header.topic, header.queue_id, next_begin,
                result.buffer_total_size,
            )  # fmt: skip
            conn.send_parts(response, result.parts)  # a slice per run of back-to-back records
            return None
        self.stats.record_get(header.consumer_group, 0)
        return response
