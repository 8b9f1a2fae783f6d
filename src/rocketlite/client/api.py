"""`BrokerApi`: one coroutine per consumer-side broker request (Java's `MQClientAPIImpl` + `PullAPIWrapper`).

Consumers of both kinds and the offset store use these; each resolves the broker address from
the instance's route table (refreshing the topic's route once when the broker is unknown),
sends the request and maps every non-success answer to a `ClientError` via `for_code`.

Pulls decode their body with the broker's own record decoder (`protocol.record`), inflate
compressed bodies, drop messages whose TAGS are not in the subscription's tag set (the broker
filters by hash code only, so collisions slip through; `PullAPIWrapper.processPullResult`), and
set MIN_OFFSET / MAX_OFFSET from the response header, as the Java client does.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final

from rocketlite.client.errors import ClientError, QueryNotFoundError, for_code
from rocketlite.client.instance import MASTER_ID, ClientInstance
from rocketlite.client.message import MessageExt, MessageQueue, PullResult, PullStatus, message_from_record
from rocketlite.protocol.bodies import SubscriptionData
from rocketlite.protocol.codes import PullSysFlag, RequestCode, ResponseCode
from rocketlite.protocol.command import RemotingCommand
from rocketlite.protocol.headers import (
    ConsumerSendMsgBackRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader,
    GetMaxOffsetResponseHeader,
    GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader,
    SearchOffsetRequestHeader,
    SearchOffsetResponseHeader,
    UpdateConsumerOffsetRequestHeader,
)
from rocketlite.protocol.message import MessageConst
from rocketlite.protocol.queue_bodies import ConsumerListBody, LockBatchRequestBody, LockBatchResponseBody
from rocketlite.protocol.record import decode_records
from rocketlite.protocol.subscription import SUB_ALL, build_subscription_data

log = logging.getLogger("rocketlite.client.api")


PULL_STATUS: Final = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


def build_subscription(topic: str, expression: str | None, sub_version: int) -> SubscriptionData:
    """`FilterAPI.buildSubscriptionData` for TAG expressions: `"*"`, or `"TagA || TagB"`.

    The SDK refuses an expression that names no tag, where the broker would match nothing."""
    if not expression or expression.strip() == SUB_ALL:
        return SubscriptionData(topic, SUB_ALL, sub_version=sub_version)
    try:
        sub = build_subscription_data(topic, expression, sub_version=sub_version)
    except ValueError:
        sub = None
    if sub is None or not sub.tags_set:
        raise ClientError(f"subscription expression {expression!r} names no tag")
    return sub


@dataclass(frozen=True, slots=True)
class RawPull:
    """A pull answer plus the broker id the broker suggests for the next pull."""

    result: PullResult
    suggest_which_broker_id: int


class BrokerApi:
    """Consumer-side requests on top of a `ClientInstance`."""

    def __init__(self, instance: ClientInstance) -> None:
        self.instance = instance

    async def _addr(self, mq: MessageQueue, broker_id: int = MASTER_ID) -> str:
        addr = self.instance.broker_addr(mq.broker_name, broker_id)
        if addr is None:
            await self.instance.update_topic_route(mq.topic)
            addr = self.instance.broker_addr(mq.broker_name, broker_id)
        if addr is None:
            raise ClientError(f"broker {mq.broker_name} of {mq.topic} is not in the route", retriable=True)
        return addr

    async def _call(
        self,
        mq: MessageQueue,
        code: int,
        ext: dict[str, str],
        body: bytes | None = None,
        timeout: float | None = None,
    ) -> RemotingCommand:
        addr = await self._addr(mq)
        response = await self.instance.invoke(addr, self.instance.command(code, ext, body), timeout)
        if response.code != ResponseCode.SUCCESS:
            raise for_code(response.code, response.remark)
        return response

    # -- offsets ---------------------------------------------------------------------------
    async def query_consumer_offset(self, group: str, mq: MessageQueue) -> int:
        """The group's committed offset; `QueryNotFoundError` (22) when it has none."""
        header = QueryConsumerOffsetRequestHeader(consumer_group=group, topic=mq.topic, queue_id=mq.queue_id)
        response = await self._call(mq, RequestCode.QUERY_CONSUMER_OFFSET, header.to_ext())
        return QueryConsumerOffsetResponseHeader.from_ext(response.ext_fields).offset

    async def update_consumer_offset(
        self, group: str, mq: MessageQueue, offset: int, *, oneway: bool
    ) -> None:
        header = UpdateConsumerOffsetRequestHeader(
            consumer_group=group, topic=mq.topic, queue_id=mq.queue_id, commit_offset=offset
        )
        if oneway:
            addr = await self._addr(mq)
            cmd = self.instance.command(RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext())
            await self.instance.invoke_oneway(addr, cmd)
        else:
            await self._call(mq, RequestCode.UPDATE_CONSUMER_OFFSET, header.to_ext())

    async def get_max_offset(self, mq: MessageQueue) -> int:
        """The next offset to be written (the number of entries the queue ever had)."""
        header = GetMaxOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id)
        response = await self._call(mq, RequestCode.GET_MAX_OFFSET, header.to_ext())
        return GetMaxOffsetResponseHeader.from_ext(response.ext_fields).offset

    async def get_min_offset(self, mq: MessageQueue) -> int:
        header = GetMinOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id)
        response = await self._call(mq, RequestCode.GET_MIN_OFFSET, header.to_ext())
        return GetMinOffsetResponseHeader.from_ext(response.ext_fields).offset

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: the first offset stored at or after `timestamp_ms`."""
        header = SearchOffsetRequestHeader(topic=mq.topic, queue_id=mq.queue_id, timestamp=timestamp_ms)
        response = await self._call(mq, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, header.to_ext())
        return SearchOffsetResponseHeader.from_ext(response.ext_fields).offset

    async def get_earliest_msg_store_time(self, mq: MessageQueue) -> int:
        header = GetEarliestMsgStoretimeRequestHeader(topic=mq.topic, queue_id=mq.queue_id)
        response = await self._call(mq, RequestCode.GET_EARLIEST_MSG_STORETIME, header.to_ext())
        return GetEarliestMsgStoretimeResponseHeader.from_ext(response.ext_fields).timestamp

    # -- membership and locks --------------------------------------------------------------
    async def consumer_id_list(self, group: str, topic: str) -> list[str]:
        """GET_CONSUMER_LIST_BY_GROUP to one broker of `topic` (every broker sees every member)."""
        addr = self.instance.any_broker_of_topic(topic)
        if addr is None:
            await self.instance.update_topic_route(topic)
            addr = self.instance.any_broker_of_topic(topic)
        if addr is None:
            return []
        header = GetConsumerListByGroupRequestHeader(consumer_group=group)
        cmd = self.instance.command(RequestCode.GET_CONSUMER_LIST_BY_GROUP, header.to_ext())
        response = await self.instance.invoke(addr, cmd)
        if response.code != ResponseCode.SUCCESS:
            raise for_code(response.code, response.remark)
        return list(ConsumerListBody.from_json(response.body or b"{}").consumer_id_list)

    async def lock_batch(self, group: str, broker_name: str, mqs: set[MessageQueue]) -> set[MessageQueue]:
        """LOCK_BATCH_MQ to the master of `broker_name`: the queues this client now holds."""
        addr = self.instance.master_addr(broker_name)
        if addr is None or not mqs:
            return set()
        body = LockBatchRequestBody(group, self.instance.client_id, frozenset(mqs)).to_bytes()
        response = await self.instance.invoke(
            addr, self.instance.command(RequestCode.LOCK_BATCH_MQ, body=body)
        )
        if response.code != ResponseCode.SUCCESS:
            raise for_code(response.code, response.remark)
        return set(LockBatchResponseBody.from_json(response.body or b"{}").lock_ok_mq_set)

    async def unlock_batch(self, group: str, broker_name: str, mqs: set[MessageQueue]) -> None:
        addr = self.instance.master_addr(broker_name)
        if addr is None or not mqs:
            return
        body = LockBatchRequestBody(group, self.instance.client_id, frozenset(mqs)).to_bytes()
        response = await self.instance.invoke(
            addr, self.instance.command(RequestCode.UNLOCK_BATCH_MQ, body=body)
        )
        if response.code != ResponseCode.SUCCESS:
            raise for_code(response.code, response.remark)

    async def send_back(
        self, msg: MessageExt, group: str, delay_level: int, max_reconsume_times: int | None
    ) -> None:
        """CONSUMER_SEND_MSG_BACK to the master of the broker the message came from."""
        addr = self.instance.master_addr(msg.broker_name)
        if addr is None:
            await self.instance.update_topic_route(msg.topic)
            addr = self.instance.master_addr(msg.broker_name)
        if addr is None:
            raise ClientError(f"no master for broker {msg.broker_name}", retriable=True)
        header = ConsumerSendMsgBackRequestHeader(
            offset=msg.commit_log_offset,
            group=group,
            delay_level=delay_level,
            origin_msg_id=msg.msg_id,
            origin_topic=msg.topic,
            unit_mode=False,
            max_reconsume_times=max_reconsume_times,
        )
        cmd = self.instance.command(RequestCode.CONSUMER_SEND_MSG_BACK, header.to_ext())
        response = await self.instance.invoke(addr, cmd, 5.0)
        if response.code != ResponseCode.SUCCESS:
            raise for_code(response.code, response.remark)

    # -- pull ------------------------------------------------------------------------------
    async def pull(
        self,
        group: str,
        mq: MessageQueue,
        sub: SubscriptionData,
        offset: int,
        max_nums: int,
        *,
        sys_flag: int,
        commit_offset: int = 0,
        suspend_timeout_ms: int = 0,
        timeout: float = 10.0,
        broker_id: int = MASTER_ID,
    ) -> RawPull:
        """PULL_MESSAGE and `processPullResult`; non-pull codes raise a `ClientError`."""
        addr = await self._addr(mq, broker_id)
        if broker_id != MASTER_ID and addr != self.instance.master_addr(mq.broker_name):
            sys_flag &= ~PullSysFlag.COMMIT_OFFSET  # a slave does not take commit offsets
        header = PullMessageRequestHeader(
            consumer_group=group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=offset,
            max_msg_nums=max_nums,
            sys_flag=sys_flag,
            commit_offset=commit_offset,
            suspend_timeout_millis=suspend_timeout_ms,
            subscription=sub.sub_string if sys_flag & PullSysFlag.SUBSCRIPTION else None,
            sub_version=sub.sub_version,
            expression_type=sub.expression_type,
            bname=mq.broker_name,
        )
        cmd = self.instance.command(RequestCode.PULL_MESSAGE, header.to_ext())
        response = await self.instance.invoke(addr, cmd, timeout)
        status = PULL_STATUS.get(ResponseCode(response.code)) if response.code in PULL_STATUS else None
        if status is None:
            raise for_code(response.code, response.remark)
        rh = PullMessageResponseHeader.from_ext(response.ext_fields)
        messages: list[MessageExt] = []
        if status is PullStatus.FOUND and response.body:
            for rec in decode_records(response.body):
                msg = message_from_record(rec, mq.broker_name)
                if sub.tags_set and msg.tags not in sub.tags_set:
                    continue
                msg.properties[MessageConst.MIN_OFFSET] = str(rh.min_offset)
                msg.properties[MessageConst.MAX_OFFSET] = str(rh.max_offset)
                messages.append(msg)
        result = PullResult(status, rh.next_begin_offset, rh.min_offset, rh.max_offset, messages)
        return RawPull(result, rh.suggest_which_broker_id)


async def read_offset_from_broker(api: BrokerApi, group: str, mq: MessageQueue) -> int:
    """The committed offset, or -1 when the broker has none (QUERY_NOT_FOUND)."""
    try:
        return await api.query_consumer_offset(group, mq)
    except QueryNotFoundError:
        return -1
