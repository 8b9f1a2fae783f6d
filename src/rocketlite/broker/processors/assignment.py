"""Server-side assignment: QUERY_ASSIGNMENT (400) and SET_MESSAGE_REQUEST_MODE (401).

RocketMQ 5's `QueryAssignmentProcessor`. A consumer that leaves rebalancing to the broker (Java's
`DefaultMQPushConsumer.setClientRebalance(false)`, a POP consumer) asks which queues are its own;
`mqadmin setConsumeMode` switches a topic and group between PULL and POP.

The answer, as RocketMQ gives it:
* the queues of the topic are its route's readable queues, over every broker that serves it
  (RocketMQ's `AssignmentManager` polls the name servers for them; here the route is asked for
  when a query comes, and without a name server the broker's own topic config is used);
* BROADCASTING: every queue; CLUSTERING with `serverLoadBalancerEnable=false`: every queue too;
* otherwise the strategy the client names ("AVG", "AVG_BY_CIRCLE", `protocol/allocate.py`) over
  the sorted queues and the group's sorted client ids. In POP mode with `popShareQueueNum <= 0`
  each client gets every broker's queues as queueId -1 ("POP from all of them"); with N > 0 it
  also gets the queues of the N clients after it, and with more clients than queues each client
  gets one queue (index mod queues);
* an unknown topic, an unknown strategy or a group with no live client: no set at all (null),
  which tells the client to keep what it has. The mode of each assignment is the one set by 401,
  else `defaultMessageRequestMode` (PULL; retry topics always PULL).

SET_MESSAGE_REQUEST_MODE refuses a retry topic (NO_PERMISSION, "retry topic is not allowed to set
mode") and keeps the rest in `config/messageRequestMode.json`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from rocketlite.broker.client_manager import ClientManager
from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.state_files import JsonConfigFile
from rocketlite.broker.topic_config import TopicConfigManager
from rocketlite.protocol import perm
from rocketlite.protocol.allocate import strategy_named
from rocketlite.protocol.bodies.assignment import (
    MessageQueueAssignment,
    MessageRequestMode,
    MessageRequestModeTable,
    QueryAssignmentRequestBody,
    QueryAssignmentResponseBody,
    SetMessageRequestModeRequestBody,
)
from rocketlite.protocol.bodies.heartbeat import MessageModel
from rocketlite.protocol.bodies.message_queue import MessageQueue
from rocketlite.protocol.bodies.route import TopicRouteData, subscribe_info_of
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.reserved import RETRY_GROUP_TOPIC_PREFIX
from rocketlite.protocol.wire.command import RemotingCommand, make_response
from rocketlite.remoting.connection import Connection

log = logging.getLogger("rocketlite.broker.assignment")

RouteLookup = Callable[[str], Awaitable[TopicRouteData | None]]


class MessageRequestModes(JsonConfigFile):
    """config/messageRequestMode.json (`MessageRequestModeManager`)."""

    file_name = "messageRequestMode.json"

    def __init__(self, config_dir: Path) -> None:
        super().__init__(config_dir)
        self.table = MessageRequestModeTable()

    def encode(self) -> str:
        return self.table.to_json()

    def decode(self, text: str) -> None:
        self.table = MessageRequestModeTable.from_json(text)

    def get(self, topic: str, group: str) -> SetMessageRequestModeRequestBody | None:
        with self.lock:
            return self.table.modes.get(topic, {}).get(group)

    def put(self, body: SetMessageRequestModeRequestBody) -> None:
        with self.lock:
            self.table.modes.setdefault(body.topic, {})[body.consumer_group] = body


class QueryAssignmentProcessor:
    def __init__(
        self,
        broker: BrokerConfig,
        topics: TopicConfigManager,
        clients: ClientManager,
        modes: MessageRequestModes,
        route_of: RouteLookup | None,
    ) -> None:
        self.broker = broker
        self.topics = topics
        self.clients = clients
        self.modes = modes
        self.route_of = route_of  # None: no name server, the broker's own topic config answers

    def handle_set_mode(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """SET_MESSAGE_REQUEST_MODE (401)."""
        del conn
        try:
            body = SetMessageRequestModeRequestBody.from_json(request.body or b"")
        except (ProtocolError, ValueError) as exc:
            return make_response(
                request, ResponseCode.SYSTEM_ERROR, f"bad SetMessageRequestModeRequestBody: {exc}"
            )
        if body.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return make_response(
                request, ResponseCode.NO_PERMISSION, "retry topic is not allowed to set mode"
            )
        self.modes.put(body)
        self.modes.persist()
        log.info("message request mode of %s / %s set to %s", body.topic, body.consumer_group, body.mode.name)
        return make_response(request, ResponseCode.SUCCESS)

    def handle_query(
        self, conn: Connection, request: RemotingCommand
    ) -> Awaitable[RemotingCommand] | RemotingCommand:
        """QUERY_ASSIGNMENT (400)."""
        try:
            body = QueryAssignmentRequestBody.from_json(request.body or b"")
        except (ProtocolError, ValueError) as exc:
            return make_response(request, ResponseCode.SYSTEM_ERROR, f"bad QueryAssignmentRequestBody: {exc}")
        return self._query(request, body, conn.remote_address)

    async def _query(
        self, request: RemotingCommand, body: QueryAssignmentRequestBody, remote: str
    ) -> RemotingCommand:
        setting = self._setting(body.topic, body.consumer_group)
        queues = await self._queues_of(body.topic)
        assigned = self._balance(body, setting, queues, remote)
        answer = QueryAssignmentResponseBody(
            None if assigned is None else tuple(MessageQueueAssignment(mq, setting.mode) for mq in assigned)
        )
        return make_response(request, ResponseCode.SUCCESS, body=answer.to_bytes())

    def _setting(self, topic: str, group: str) -> SetMessageRequestModeRequestBody:
        setting = self.modes.get(topic, group)
        if setting is not None:
            return setting
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            return SetMessageRequestModeRequestBody(topic, group, MessageRequestMode.PULL)
        mode = self.broker.default_message_request_mode
        share = self.broker.default_pop_share_queue_num if mode is MessageRequestMode.POP else 0
        return SetMessageRequestModeRequestBody(topic, group, mode, share)

    async def _queues_of(self, topic: str) -> list[MessageQueue] | None:
        """The topic's readable queues over every broker (sorted), or None if it is unknown."""
        if self.route_of is not None:
            try:
                route = await self.route_of(topic)
            except (OSError, TimeoutError) as exc:
                log.warning(
                    "QueryLoad: no route of %s from the name servers (%s); using this broker's", topic, exc
                )
            else:
                return subscribe_info_of(topic, route) if route is not None else None
        tc = self.topics.select(topic)
        if tc is None:
            return None
        if not perm.is_readable(tc.perm & self.broker.broker_permission):
            return []
        return [MessageQueue(topic, self.broker.broker_name, q) for q in range(tc.read_queue_nums)]

    def _balance(
        self,
        body: QueryAssignmentRequestBody,
        setting: SetMessageRequestModeRequestBody,
        queues: list[MessageQueue] | None,
        remote: str,
    ) -> Sequence[MessageQueue] | None:
        """`doLoadBalance`: None is "no valid answer"."""
        topic, group = body.topic, body.consumer_group
        if queues is None:
            if not topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                log.warning(
                    "QueryLoad: no assignment for group[%s], the topic[%s] does not exist.", group, topic
                )
            return None
        if body.message_model is MessageModel.BROADCASTING or not self.broker.server_load_balancer_enable:
            return queues
        info = self.clients.consumer_group(group)
        cid_all = sorted(info.client_ids()) if info is not None else []
        if not cid_all:
            log.warning(
                "QueryLoad: no assignment for group[%s] topic[%s], get consumer id list failed", group, topic
            )
            return None
        strategy = strategy_named(body.strategy_name)
        if strategy is None:
            log.warning("QueryLoad: unsupported strategy [%s], %s", body.strategy_name, remote)
            return None
        if setting.mode is not MessageRequestMode.POP:
            return strategy(group, body.client_id, queues, cid_all)
        if setting.pop_share_queue_num <= 0:  # every client POPs every broker's queues
            return sorted({MessageQueue(topic, mq.broker_name, -1) for mq in queues})
        if len(cid_all) > len(queues):  # one queue each, so that every client has one
            if body.client_id not in cid_all or not queues:
                return []
            return [queues[cid_all.index(body.client_id) % len(queues)]]
        assigned = list(strategy(group, body.client_id, queues, cid_all))
        if body.client_id in cid_all:
            index = cid_all.index(body.client_id)
            for _ in range(setting.pop_share_queue_num):
                index = (index + 1) % len(cid_all)
                assigned.extend(strategy(group, cid_all[index], queues, cid_all))
        return sorted(set(assigned))
