"""`BrokerApi`: one coroutine per consumer-side broker request (Java's `MQClientAPIImpl` + `PullAPIWrapper`).

Consumers of both kinds and the offset store use these; each resolves the broker address from
the instance's route table (refreshing the topic's route once when the broker is unknown),
sends the request and maps every non-success answer to a `ClientError` via `for_code`.

Requests are built and answers parsed by `protocol.requests`; this class adds the SDK's policy.
Pulls decode their body with the broker's own record decoder (`protocol.record`), inflate
compressed bodies, drop messages whose TAGS are not in the subscription's tag set (the broker
filters by hash code only, so collisions slip through; `PullAPIWrapper.processPullResult`), and
set MIN_OFFSET / MAX_OFFSET from the response header, as the Java client does.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from rocketlite.client.errors import ClientError, QueryNotFoundError, for_code, parse_answer
from rocketlite.client.instance import MASTER_ID, ClientInstance
from rocketlite.client.message import MessageExt, MessageQueue, PullResult, message_from_record
from rocketlite.client.selector import MessageSelector, as_selector
from rocketlite.protocol.bodies.heartbeat import SubscriptionData
from rocketlite.protocol.bodies.lists import ConsumerListBody
from rocketlite.protocol.bodies.message_queue import LockBatchRequestBody, LockBatchResponseBody
from rocketlite.protocol.codes import PullSysFlag, RequestCode, ResponseCode
from rocketlite.protocol.message import MessageConst
from rocketlite.protocol.requests import offsets
from rocketlite.protocol.requests.pull import build_pull, parse_pull
from rocketlite.protocol.subscription import SUB_ALL, build_subscription_data
from rocketlite.protocol.wire import fastjson
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.protocol.wire.headers import (
    ConsumerSendMsgBackRequestHeader,
    GetConsumerListByGroupRequestHeader,
)

log = logging.getLogger("rocketlite.client.api")


def build_subscription(
    topic: str, expression: str | MessageSelector | None, sub_version: int
) -> SubscriptionData:
    """`FilterAPI.build`: a tag expression (`"*"`, `"TagA || TagB"`) or a `MessageSelector`.

    The SDK refuses a tag expression that names no tag, where the broker would match nothing;
    an SQL92 selector was compiled when it was made (`MessageSelector.by_sql`)."""
    selector = as_selector(expression)
    if not selector.is_tag:
        return SubscriptionData(
            topic, selector.expression, sub_version=sub_version, expression_type=selector.expression_type
        )
    expression = selector.expression
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

    async def _request(self, mq: MessageQueue, cmd: RemotingCommand) -> RemotingCommand:
        return await self.instance.invoke(await self._addr(mq), cmd)

    # -- offsets ---------------------------------------------------------------------------
    async def query_consumer_offset(self, group: str, mq: MessageQueue) -> int:
        """The group's committed offset; `QueryNotFoundError` (22) when it has none."""
        cmd = offsets.build_query_consumer_offset(group, mq.topic, mq.queue_id)
        response = await self._request(mq, cmd)
        offset = parse_answer(offsets.parse_query_consumer_offset, response)
        if offset is None:
            raise for_code(response.code, response.remark)
        return offset

    async def update_consumer_offset(
        self, group: str, mq: MessageQueue, offset: int, *, oneway: bool
    ) -> None:
        cmd = offsets.build_update_consumer_offset(group, mq.topic, mq.queue_id, offset, oneway=oneway)
        if oneway:
            await self.instance.invoke_oneway(await self._addr(mq), cmd)
        else:
            parse_answer(offsets.parse_update_consumer_offset, await self._request(mq, cmd))

    async def get_max_offset(self, mq: MessageQueue) -> int:
        """The next offset to be written (the number of entries the queue ever had)."""
        response = await self._request(mq, offsets.build_get_max_offset(mq.topic, mq.queue_id))
        return parse_answer(offsets.parse_get_max_offset, response)

    async def get_min_offset(self, mq: MessageQueue) -> int:
        response = await self._request(mq, offsets.build_get_min_offset(mq.topic, mq.queue_id))
        return parse_answer(offsets.parse_get_min_offset, response)

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP: the first offset stored at or after `timestamp_ms`."""
        response = await self._request(mq, offsets.build_search_offset(mq.topic, mq.queue_id, timestamp_ms))
        return parse_answer(offsets.parse_search_offset, response)

    async def get_earliest_msg_store_time(self, mq: MessageQueue) -> int:
        response = await self._request(mq, offsets.build_get_earliest_msg_store_time(mq.topic, mq.queue_id))
        return parse_answer(offsets.parse_get_earliest_msg_store_time, response)

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
    async def check_client_config(self, group: str, sub: SubscriptionData) -> None:
        """CHECK_CLIENT_CONFIG (46) to a broker of the topic, as the Java push consumer sends it
        at start for a subscription that is not a tag expression: a broker that does not filter
        SQL92 (SYSTEM_ERROR) or cannot parse it (SUBSCRIPTION_PARSE_FAILED) raises. A topic no
        broker serves yet (its route not registered) is not checked, as Java's
        `checkClientInBroker` skips it; its pulls are refused the same way later."""
        addr = self.instance.any_broker_of_topic(sub.topic)
        if addr is None:
            await self.instance.update_topic_route(sub.topic)
            addr = self.instance.any_broker_of_topic(sub.topic)
        if addr is None:
            return
        body = {"clientId": self.instance.client_id, "group": group, "subscriptionData": sub.to_json_obj()}
        cmd = self.instance.command(RequestCode.CHECK_CLIENT_CONFIG, body=fastjson.dumps(body).encode())
        answer = await self.instance.invoke(addr, cmd)
        if answer.code != ResponseCode.SUCCESS:
            raise for_code(answer.code, answer.remark)

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
        cmd = build_pull(
            group=group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            offset=offset,
            max_nums=max_nums,
            sys_flag=sys_flag,
            subscription=sub,
            commit_offset=commit_offset,
            suspend_timeout_ms=suspend_timeout_ms,
            broker_name=mq.broker_name,
        )
        answer = parse_answer(parse_pull, await self.instance.invoke(addr, cmd, timeout))
        messages: list[MessageExt] = []
        for rec in answer.records():
            msg = message_from_record(rec, mq.broker_name)
            if sub.tags_set and msg.tags not in sub.tags_set:
                continue
            msg.properties[MessageConst.MIN_OFFSET] = str(answer.min_offset)
            msg.properties[MessageConst.MAX_OFFSET] = str(answer.max_offset)
            messages.append(msg)
        result = PullResult(
            answer.status, answer.next_begin_offset, answer.min_offset, answer.max_offset, messages
        )
        return RawPull(result, answer.suggest_which_broker_id)


async def read_offset_from_broker(api: BrokerApi, group: str, mq: MessageQueue) -> int:
    """The committed offset, or -1 when the broker has none (QUERY_NOT_FOUND)."""
    try:
        return await api.query_consumer_offset(group, mq)
    except QueryNotFoundError:
        return -1
