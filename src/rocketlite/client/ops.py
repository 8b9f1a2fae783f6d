"""What a client answers when a broker relays an operator's request to it (Java's
`ClientRemotingProcessor`): mqadmin's resetOffsetByTime and consumerStatus, the dashboard's
consumer view and "resend message", come to the client this way.

- RESET_CONSUMER_CLIENT_OFFSET (220, one-way): the group's push consumer moves the named
  queues to the new offsets (`AsyncPushConsumer.reset_offset`); no answer, as Java's.
- GET_CONSUMER_RUNNING_INFO (307): the group's consumer describes itself
  (`ConsumerRunningInfo`): its settings under Java's property names plus RocketMQ's `PROP_*`
  keys, its subscriptions, each queue it holds (`ProcessQueueInfo`: committed offset, what is
  cached, the lock, the last pull and consume), each topic's last minute (`ConsumeStatus`), and
  the stacks of this process's threads when `jstackEnable` asks for them.
- CONSUME_MESSAGE_DIRECTLY (309): the stored message in the body goes through the push
  consumer's listener; the verdict is the answer (`ConsumeMessageDirectlyResult`).
- GET_CONSUMER_STATUS_FROM_CLIENT (221, the older admin call behind
  INVOKE_BROKER_TO_GET_CONSUMER_STATUS): the consumer's offsets of one topic.

A group this client has no consumer for is answered SYSTEM_ERROR "The Consumer Group <g> not
exist in this consumer"; a pull consumer has no listener and no resets, as in Java.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import traceback
from typing import TYPE_CHECKING

from rocketlite.client.message import MessageExt, MessageQueue, message_from_record
from rocketlite.client.process_queue import ProcessQueue
from rocketlite.protocol.bodies.admin import ResetOffsetBody
from rocketlite.protocol.bodies.running_info import (
    PROP_CLIENT_VERSION,
    PROP_CONSUME_ORDERLY,
    PROP_CONSUME_TYPE,
    PROP_CONSUMER_START_TIMESTAMP,
    PROP_NAMESERVER_ADDR,
    PROP_THREADPOOL_CORE_SIZE,
    ConsumerRunningInfo,
    ProcessQueueInfo,
)
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.formats.record import decode_record
from rocketlite.protocol.wire import fastjson
from rocketlite.protocol.wire.admin import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    ResetOffsetRequestHeader,
)
from rocketlite.protocol.wire.command import RemotingCommand, make_response
from rocketlite.remoting.connection import Connection, HandlerResult, RequestTable

if TYPE_CHECKING:
    from rocketlite.client.consumer_push import AsyncPushConsumer
    from rocketlite.client.instance import ClientInstance

log = logging.getLogger("rocketlite.client.ops")

CLIENT_VERSION_DESC = "V4_9_8"  # what the client reports (protocol.wire.command.DEFAULT_VERSION)


def register(table: RequestTable, instance: ClientInstance) -> None:
    """The relayed requests on the instance's connections to brokers."""
    ops = ClientOps(instance)
    table.register(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, ops.reset_offset)
    table.register(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, ops.get_consumer_status)
    table.register(RequestCode.GET_CONSUMER_RUNNING_INFO, ops.get_consumer_running_info)
    table.register(RequestCode.CONSUME_MESSAGE_DIRECTLY, ops.consume_message_directly)


def _epoch_ms(monotonic: float) -> int:
    """A `time.monotonic()` reading as epoch milliseconds (what Java's timestamps are)."""
    return int((time.time() - (time.monotonic() - monotonic)) * 1000)


def queue_info(pq: ProcessQueue, commit_offset: int) -> ProcessQueueInfo:
    """`ProcessQueue.fillProcessQueueInfo`."""
    return ProcessQueueInfo(
        commit_offset=commit_offset,
        cached_msg_min_offset=min(pq.msgs, default=0),
        cached_msg_max_offset=max(pq.msgs, default=0),
        cached_msg_count=len(pq.msgs),
        cached_msg_size_in_mib=pq.msg_size // (1024 * 1024),
        transaction_msg_min_offset=min(pq.consuming, default=0),
        transaction_msg_max_offset=max(pq.consuming, default=0),
        transaction_msg_count=len(pq.consuming),
        locked=pq.locked,
        last_lock_timestamp=_epoch_ms(pq.last_lock_time) if pq.last_lock_time else 0,
        droped=pq.dropped,
        last_pull_timestamp=_epoch_ms(pq.last_pull_time),
        last_consume_timestamp=_epoch_ms(pq.last_consume_time),
    )


def running_info(consumer: AsyncPushConsumer, namesrv_addrs: list[str]) -> ConsumerRunningInfo:
    """`DefaultMQPushConsumerImpl.consumerRunningInfo` + `MQClientInstance.consumerRunningInfo`."""
    cfg = consumer.config
    max_reconsume = consumer.max_reconsume_times
    props = {
        "consumerGroup": consumer.group,
        "messageModel": consumer.message_model.name,
        "consumeFromWhere": consumer.consume_from_where.name,
        "consumeTimestamp": time.strftime("%Y%m%d%H%M%S", time.localtime(consumer.consume_timestamp / 1000)),
        "consumeThreadMin": str(consumer.consume_thread_max),
        "consumeThreadMax": str(consumer.consume_thread_max),
        "consumeConcurrentlyMaxSpan": "2000",
        "pullThresholdForQueue": str(consumer.pull_threshold_for_queue),
        "pullThresholdSizeForQueue": str(consumer.pull_threshold_size_for_queue),
        "pullInterval": str(int(consumer.pull_interval * 1000)),
        "consumeMessageBatchMaxSize": str(consumer.consume_message_batch_max_size),
        "pullBatchSize": str(consumer.pull_batch_size),
        "postSubscriptionWhenPull": str(consumer.post_subscription_when_pull).lower(),
        "maxReconsumeTimes": str(max_reconsume if max_reconsume is not None else -1),
        "suspendCurrentQueueTimeMillis": str(int(consumer.suspend_current_queue_time * 1000)),
        "awaitTerminationMillisWhenShutdown": str(int(consumer.await_termination * 1000)),
        "namesrvAddr": cfg.namesrv_addr,
        "instanceName": cfg.instance_name,
        "clientIP": consumer.instance.ip,
        "pollNameServerInterval": str(int(cfg.poll_name_server_interval * 1000)),
        "heartbeatBrokerInterval": str(int(cfg.heartbeat_broker_interval * 1000)),
        "persistConsumerOffsetInterval": str(int(cfg.persist_consumer_offset_interval * 1000)),
        "unitMode": "false",
        PROP_CONSUME_ORDERLY: str(consumer.orderly).lower(),
        PROP_THREADPOOL_CORE_SIZE: str(consumer.consume_thread_max),
        PROP_CONSUMER_START_TIMESTAMP: str(consumer.start_timestamp),
        PROP_NAMESERVER_ADDR: "".join(f"{a};" for a in namesrv_addrs),
        PROP_CONSUME_TYPE: consumer.consume_type.name,
        PROP_CLIENT_VERSION: CLIENT_VERSION_DESC,
    }
    memory = consumer.offset_store.offsets()
    subs = consumer.subscriptions()
    return ConsumerRunningInfo(
        properties=props,
        subscription_set=tuple(subs[t] for t in sorted(subs)),
        mq_table={mq: queue_info(pq, memory.get(mq, -1)) for mq, pq in consumer.process_queues().items()},
        status_table={topic: consumer.stats.status(topic) for topic in subs},
    )


def jstack() -> str:
    """`UtilAll.jstack`: every thread of this process with its stack."""
    frames = sys._current_frames()
    parts = []
    for thread in threading.enumerate():
        frame = frames.get(thread.ident or -1)
        parts.append(f"Thread: {thread.name} {'daemon' if thread.daemon else ''}")
        if frame is not None:
            parts.extend(f"    {line.rstrip()}" for line in traceback.format_stack(frame))
        parts.append("")
    return "\n".join(parts)


class ClientOps:
    """The handlers (`register`), over the instance's consumer members."""

    def __init__(self, instance: ClientInstance) -> None:
        self.instance = instance

    def _push_consumer(self, group: str) -> AsyncPushConsumer | None:
        from rocketlite.client.consumer_push import AsyncPushConsumer  # noqa: PLC0415 (it imports us)

        member = self.instance.consumers.get(group)
        return member if isinstance(member, AsyncPushConsumer) else None

    @staticmethod
    def _no_group(request: RemotingCommand, group: str) -> RemotingCommand:
        remark = f"The Consumer Group <{group}> not exist in this consumer"
        return make_response(request, ResponseCode.SYSTEM_ERROR, remark)

    def reset_offset(self, conn: Connection, request: RemotingCommand) -> HandlerResult:
        header = ResetOffsetRequestHeader.from_ext(request.ext_fields)
        log.info(
            "reset offset from broker %s: topic=%s group=%s timestamp=%d",
            conn.remote_address, header.topic, header.group, header.timestamp,
        )  # fmt: skip
        consumer = self._push_consumer(header.group)
        if consumer is None:
            log.info("[reset-offset] no push consumer of group %s here", header.group)
            return None
        offsets = dict(ResetOffsetBody.from_json(request.body or b"{}").offset_table)
        self.instance.spawn(consumer.reset_offset(header.topic, offsets), f"offset reset of {header.group}")
        return None

    def get_consumer_status(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        topic = request.ext_fields.get("topic", "")
        consumer = self._push_consumer(request.ext_fields.get("group", ""))
        table: dict[MessageQueue, int] = {}
        if consumer is not None:
            table = {mq: off for mq, off in consumer.offset_store.offsets().items() if mq.topic == topic}
        body = fastjson.dumps({"messageQueueTable": table}).encode("utf-8")
        return make_response(request, ResponseCode.SUCCESS, body=body)

    def get_consumer_running_info(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        header = GetConsumerRunningInfoRequestHeader.from_ext(request.ext_fields)
        consumer = self._push_consumer(header.consumer_group)
        if consumer is None:
            return self._no_group(request, header.consumer_group)
        info = running_info(consumer, self.instance.namesrv_addrs)
        if header.jstack_enable:
            info = ConsumerRunningInfo(
                info.properties, info.subscription_set, info.mq_table, info.status_table, jstack=jstack()
            )
        return make_response(request, ResponseCode.SUCCESS, body=info.to_bytes())

    def consume_message_directly(self, conn: Connection, request: RemotingCommand) -> HandlerResult:
        del conn
        header = ConsumeMessageDirectlyResultRequestHeader.from_ext(request.ext_fields)
        group = header.consumer_group or ""
        consumer = self._push_consumer(group)
        if consumer is None:
            return self._no_group(request, group)
        try:
            msg = message_from_record(decode_record(request.body or b""), header.broker_name or "")
        except ValueError as exc:
            remark = f"the message to consume does not decode: {exc}"
            return make_response(request, ResponseCode.SYSTEM_ERROR, remark)
        return self._consume(request, consumer, msg, header.broker_name or "")

    async def _consume(
        self, request: RemotingCommand, consumer: AsyncPushConsumer, msg: MessageExt, broker_name: str
    ) -> RemotingCommand:
        result = await consumer.consume_directly(msg, broker_name)
        return make_response(request, ResponseCode.SUCCESS, body=result.to_bytes())
