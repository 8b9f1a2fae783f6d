"""The admin requests a broker answers by asking the consumers themselves (RocketMQ's `Broker2Client`).

- INVOKE_BROKER_TO_RESET_OFFSET (222, mqadmin resetOffsetByTime / skipAccumulatedMessage, the
  dashboard's reset). With `useServerSideResetOffset` (true, RocketMQ 5.3's default) the broker
  resets the group itself: each queue's offset at the timestamp (its end for -1) is committed
  and kept as a pending reset, which the group's next pull of that queue takes, answered
  PULL_OFFSET_MOVED to the reset offset (`ResetOffsetGuard`): every client moves there as it
  does after any moved offset, and offset updates sent meanwhile are ignored. With the setting
  false, as RocketMQ 4.x, the new offsets (per queue: the one at the timestamp if it is behind
  the group's, or always when forced) go to every client of the group in a one-way
  RESET_CONSUMER_CLIENT_OFFSET (220), which rewinds its queues; a group without an online
  client is answered CONSUMER_NOT_ONLINE, and mqadmin then rewrites the committed offsets
  itself. Either way the answer is the new offsets (`ResetOffsetBody`).
- GET_CONSUMER_RUNNING_INFO (307) and CONSUME_MESSAGE_DIRECTLY (309): forwarded, unchanged, to
  the one client of the group named by its clientId, on its own connection; the client's answer
  is the answer. CONSUME_MESSAGE_DIRECTLY also gets the stored message (found by its offsetMsgId)
  as body and the broker name and topic / group sysFlags as fields, as Java adds them. An
  unknown client is "The Consumer <group> <clientId> not online" (SYSTEM_ERROR), a client that
  does not answer within 10 s CONSUME_MSG_TIMEOUT.

Only 4.x clients (remoting connections) are asked: 5.x gRPC clients have no way to answer.
"""

from __future__ import annotations

import logging

from rocketlite.broker.client_manager import ClientManager
from rocketlite.broker.config import BrokerConfig, BrokerRole
from rocketlite.broker.state_files import ConsumerOffsetTable
from rocketlite.broker.subscription_group import SubscriptionGroupManager
from rocketlite.broker.topic_config import TopicConfigManager
from rocketlite.protocol.bodies.admin import ResetOffsetBody
from rocketlite.protocol.bodies.message_queue import MessageQueue
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.message import parse_msg_id
from rocketlite.protocol.wire import fastjson
from rocketlite.protocol.wire.admin import (
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    ResetOffsetRequestHeader,
)
from rocketlite.protocol.wire.command import RemotingCommand, make_request, make_response
from rocketlite.remoting.connection import Connection, Handler, HandlerResult, WireResult
from rocketlite.store.api import StoreAPI

log = logging.getLogger("rocketlite.broker.relay")

CALL_CLIENT_TIMEOUT_S = 10.0  # Broker2Client.callClient
RESET_MIN_VERSION = 28  # MQVersion.Version.V3_0_7_SNAPSHOT.ordinal()
CALL_MIN_VERSION = 62  # MQVersion.Version.V3_1_8_SNAPSHOT.ordinal()


def _version_desc(version: int) -> str:
    return f"version {version}"  # MQVersion.getVersionDesc: the name of that ordinal


class ClientRelayProcessor:
    """222, 307 and 309 (registered in `broker/requests.py`)."""

    def __init__(
        self,
        broker: BrokerConfig,
        store: StoreAPI,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetTable,
        clients: ClientManager,
    ) -> None:
        self.broker = broker
        self.store = store
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.clients = clients

    # -- INVOKE_BROKER_TO_RESET_OFFSET ------------------------------------------------------
    def invoke_broker_to_reset_offset(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = ResetOffsetRequestHeader.from_ext(request.ext_fields)
        log.info(
            "reset offset started by %s: topic=%s group=%s timestamp=%d force=%s",
            conn.remote_address, header.topic, header.group, header.timestamp, header.is_force,
        )  # fmt: skip
        if self.broker.use_server_side_reset_offset:
            return self._reset_on_broker(request, header)
        return self._reset_on_clients(request, header)

    def _offset_at(self, topic: str, queue_id: int, timestamp: int) -> int:
        """`searchOffsetByTimestamp`: the queue's end for a negative timestamp."""
        if timestamp < 0:
            return self.store.get_max_offset_in_queue(topic, queue_id)
        return self.store.get_offset_in_queue_by_time(topic, queue_id, timestamp)

    def _reset_on_broker(self, request: RemotingCommand, header: ResetOffsetRequestHeader) -> RemotingCommand:
        """`resetOffsetInner`: commit the offsets now, and let each queue's next pull take them."""
        topic, group = header.topic, header.group
        if self.broker.broker_role is BrokerRole.SLAVE:
            return make_response(request, ResponseCode.SYSTEM_ERROR, "Can not reset offset in slave broker")
        tc = self.topics.select(topic)
        if tc is None:
            return make_response(request, ResponseCode.TOPIC_NOT_EXIST, f"Topic {topic} does not exist")
        if group not in self.groups.table:
            code = ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
            return make_response(request, code, f"Group {group} does not exist")
        targets: dict[int, int] = {}
        if header.queue_id >= 0:
            offset = header.offset
            if offset is not None and offset != -1:
                low = self.store.get_min_offset_in_queue(topic, header.queue_id)
                high = self.store.get_max_offset_in_queue(topic, header.queue_id)
                if (low >= 0 and offset < low) or offset > high + 1:
                    remark = f"Target offset {offset} not in consume queue range [{low}-{high}]"
                    return make_response(request, ResponseCode.SYSTEM_ERROR, remark)
            else:
                offset = self._offset_at(topic, header.queue_id, header.timestamp)
            targets[header.queue_id] = offset
        else:
            for qid in range(tc.read_queue_nums):
                targets[qid] = self._offset_at(topic, qid, header.timestamp)
        for qid, offset in targets.items():
            if offset >= 0:
                self.offsets.assign_reset(group, topic, qid, offset)
        log.info("reset offset of %s on %s: %s", group, topic, targets)
        name = self.broker.broker_name
        body = ResetOffsetBody({MessageQueue(topic, name, qid): off for qid, off in targets.items()})
        return make_response(request, ResponseCode.SUCCESS, body=body.to_bytes())

    def _reset_on_clients(
        self, request: RemotingCommand, header: ResetOffsetRequestHeader
    ) -> RemotingCommand:
        """`Broker2Client.resetOffset`: new offsets computed here, applied by the group's clients."""
        topic, group = header.topic, header.group
        tc = self.topics.select(topic)
        if tc is None:
            remark = f"[reset-offset] reset offset failed, no topic in this broker. topic={topic}"
            return make_response(request, ResponseCode.TOPIC_NOT_EXIST, remark)
        table: dict[MessageQueue, int] = {}
        for qid in range(tc.write_queue_nums):
            consumer_offset = self.offsets.query(group, topic, qid)
            if consumer_offset == -1:
                remark = f"THe consumer group <{group}> not exist"  # sic, Java's remark
                return make_response(request, ResponseCode.SYSTEM_ERROR, remark)
            at = max(self._offset_at(topic, qid, header.timestamp), 0)
            forced = header.is_force or at < consumer_offset
            table[MessageQueue(topic, self.broker.broker_name, qid)] = at if forced else consumer_offset
        info = self.clients.consumer_group(group)
        channels = [i for i in info.channels.values() if not i.conn.closed] if info is not None else []
        if not channels:
            remark = (
                f"Consumer not online, so can not reset offset, Group: {group} Topic: {topic} "
                f"Timestamp: {header.timestamp}"
            )
            log.warning(remark)
            return make_response(request, ResponseCode.CONSUMER_NOT_ONLINE, remark)
        relayed = ResetOffsetRequestHeader(
            group=group, topic=topic, timestamp=header.timestamp, is_force=False
        ).to_ext()
        if request.language == "CPP":  # ResetOffsetBodyForC: a list instead of an object-keyed map
            rows = [{**mq.to_json_obj(), "offset": off} for mq, off in table.items()]
            body = fastjson.dumps({"offsetTable": rows}).encode("utf-8")
        else:
            body = ResetOffsetBody(table).to_bytes()
        for client in channels:
            if client.version < RESET_MIN_VERSION:
                remark = f"the client does not support this feature. version={_version_desc(client.version)}"
                return make_response(request, ResponseCode.SYSTEM_ERROR, remark)
            if isinstance(client.conn, Connection):
                client.conn.oneway(make_request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, relayed, body))
                log.info("[reset-offset] sent to %s of %s for %s", client.client_id, group, topic)
        return make_response(request, ResponseCode.SUCCESS, body=ResetOffsetBody(table).to_bytes())

    # -- GET_CONSUMER_RUNNING_INFO / CONSUME_MESSAGE_DIRECTLY -------------------------------
    def get_consumer_running_info(self, conn: Connection, request: RemotingCommand) -> HandlerResult:
        del conn
        header = GetConsumerRunningInfoRequestHeader.from_ext(request.ext_fields)
        return self._call_consumer(request, header.consumer_group, header.client_id, request.body)

    def consume_message_directly(self, conn: Connection, request: RemotingCommand) -> HandlerResult:
        del conn
        header = ConsumeMessageDirectlyResultRequestHeader.from_ext(request.ext_fields)
        request.ext_fields["brokerName"] = self.broker.broker_name
        if header.topic:
            tc = self.topics.select(header.topic)
            if tc is not None:
                request.ext_fields["topicSysFlag"] = str(tc.topic_sys_flag)
        if header.consumer_group:
            group_cfg = self.groups.table.get(header.consumer_group)
            if group_cfg is not None:
                request.ext_fields["groupSysFlag"] = "0"
        body = request.body
        if header.msg_id:
            try:
                view = self.store.select_one_message_by_offset(parse_msg_id(header.msg_id).offset)
            except ValueError:
                view = None  # Java leaves the body as is when the id does not decode
            if view is not None:
                body = bytes(view)
                view.release()
        return self._call_consumer(request, header.consumer_group or "", header.client_id or "", body)

    def _call_consumer(
        self, request: RemotingCommand, group: str, client_id: str, body: bytes | None
    ) -> HandlerResult:
        """`callConsumer`: the request, its fields and `body`, to the client; its answer back."""
        info = self.clients.consumer_group(group)
        channel = info.channels.get(client_id) if info is not None else None
        if channel is None or channel.conn.closed or not isinstance(channel.conn, Connection):
            remark = f"The Consumer <{group}> <{client_id}> not online"
            return make_response(request, ResponseCode.SYSTEM_ERROR, remark)
        if channel.version < CALL_MIN_VERSION:
            remark = (
                f"The Consumer <{client_id}> Version <{_version_desc(channel.version)}> too low to finish, "
                "please upgrade it to V3_1_8_SNAPSHOT"
            )
            return make_response(request, ResponseCode.SYSTEM_ERROR, remark)
        relayed = make_request(request.code, dict(request.ext_fields), body)
        return self._await_client(request, channel.conn, relayed, group, client_id)

    async def _await_client(
        self, request: RemotingCommand, conn: Connection, relayed: RemotingCommand, group: str, client_id: str
    ) -> RemotingCommand:
        try:
            answer = await conn.request(relayed, CALL_CLIENT_TIMEOUT_S)
        except TimeoutError:
            remark = f"consumer <{group}> <{client_id}> Timeout: no answer in {CALL_CLIENT_TIMEOUT_S:.0f}s"
            return make_response(request, ResponseCode.CONSUME_MSG_TIMEOUT, remark)
        except OSError as exc:
            remark = f"invoke consumer <{group}> <{client_id}> Exception: {exc}"
            return make_response(request, ResponseCode.SYSTEM_ERROR, remark)
        return make_response(request, answer.code, answer.remark, answer.ext_fields, answer.body)


class ResetOffsetGuard:
    """The two places a server-side reset shows (RocketMQ's PullMessageProcessor and
    ConsumerManageProcessor checks), wrapped around the pull and offset-update handlers.

    A pull of a queue with a pending reset takes it and is answered PULL_OFFSET_MOVED to the reset
    offset (the queue's bounds in the header); an offset update for such a queue is answered
    SUCCESS "Offset has been previously reset" and ignored. With no reset pending (the common
    case) each costs one empty-dict test.
    """

    def __init__(self, store: StoreAPI, offsets: ConsumerOffsetTable) -> None:
        self.store = store
        self.offsets = offsets

    def _pending(self, request: RemotingCommand) -> tuple[str, str, int] | None:
        if not self.offsets.reset_table:
            return None
        ext = request.ext_fields
        try:
            return ext["consumerGroup"], ext["topic"], int(ext["queueId"])
        except (KeyError, ValueError):
            return None  # the wrapped handler answers the malformed request

    def answer_reset(self, request: RemotingCommand) -> RemotingCommand | None:
        """PULL_OFFSET_MOVED to the pending reset of the pulled queue (taken), else None. Also
        asked by a held pull when it is re-run, as RocketMQ re-runs the whole processor: a pull
        parked before the reset must not answer the messages after the old offset."""
        key = self._pending(request)
        offset = self.offsets.take_reset(*key) if key is not None else None
        if key is None or offset is None:
            return None
        group, topic, qid = key
        log.info("pull of %s by %s on queue %d: offset reset to %d", topic, group, qid, offset)
        ext = {
            "suggestWhichBrokerId": "0",
            "nextBeginOffset": str(offset),
            "minOffset": str(max(self.store.get_min_offset_in_queue(topic, qid), 0)),
            "maxOffset": str(self.store.get_max_offset_in_queue(topic, qid)),
        }
        return make_response(request, ResponseCode.PULL_OFFSET_MOVED, "OFFSET_RESET", ext)

    def guard_pull(self, pull: Handler) -> Handler:
        def handle(conn: Connection, request: RemotingCommand) -> WireResult:
            moved = self.answer_reset(request)
            return moved if moved is not None else pull(conn, request)

        return handle

    def guard_update(self, update: Handler) -> Handler:
        def handle(conn: Connection, request: RemotingCommand) -> WireResult:
            key = self._pending(request)
            if key is not None and self.offsets.has_reset(*key):
                return make_response(request, ResponseCode.SUCCESS, "Offset has been previously reset")
            return update(conn, request)

        return handle
