"""Admin requests about the broker's catalog of topics and groups, beyond `admin_requests`' 4.x set.

What mqadmin 5.3 and the dashboard send, answered as RocketMQ 5.3's `AdminBrokerProcessor`:

- UPDATE_AND_CREATE_TOPIC_LIST (18, mqadmin updateTopicList): every topic of the batch is checked
  first (a bad name or a system topic refuses the whole batch with INVALID_PARAMETER, the topic
  named in the remark), then all are written at once, one registration with the name servers;
- GET_TOPIC_CONFIG (351): one topic's config (TopicConfigAndQueueMapping: no static-topic mapping
  here), TOPIC_NOT_EXIST "No topic in this broker. topic: X" when unknown;
- UPDATE_AND_CREATE_SUBSCRIPTIONGROUP_LIST (225), GET_SUBSCRIPTIONGROUP_CONFIG (352);
- QUERY_TOPICS_BY_CONSUMER (343): the topics a group has offsets for (`whichTopicByConsumer`),
  with this broker's address; QUERY_SUBSCRIPTION_BY_CONSUMER (345): an online group's
  subscription of one topic (none when offline);
- GET_ALL_PRODUCER_INFO (328): every producer the broker knows from heartbeats, by group;
- CLEAN_EXPIRED_CONSUMEQUEUE (306): consume queues whose records are all gone from the commit log
  are deleted; CLEAN_UNUSED_TOPIC (316): consume queues of topics no longer in the topic config
  are deleted. Both leave system topics alone, as RocketMQ does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from rocketlite.broker.client_manager import ClientManager
from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.processors.admin_requests import is_system_topic
from rocketlite.broker.state_files import ConsumerOffsetTable
from rocketlite.broker.subscription_group import SubscriptionGroupConfig, SubscriptionGroupManager
from rocketlite.broker.topic_config import TopicConfigManager
from rocketlite.protocol import perm, topic_attributes
from rocketlite.protocol.bodies.admin import (
    CreateTopicListRequestBody,
    ProducerInfo,
    ProducerTableInfo,
    QuerySubscriptionResponseBody,
    SubscriptionGroupList,
)
from rocketlite.protocol.bodies.lists import TopicList
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.wire import fastjson
from rocketlite.protocol.wire.admin import (
    INVALID_PARAMETER,
    GetSubscriptionGroupConfigRequestHeader,
    GetTopicConfigRequestHeader,
    QuerySubscriptionByConsumerRequestHeader,
    QueryTopicsByConsumerRequestHeader,
)
from rocketlite.protocol.wire.command import RemotingCommand, make_response
from rocketlite.remoting.connection import Connection, HandlerResult
from rocketlite.store.api import StoreAPI

log = logging.getLogger("rocketlite.broker.admin")


class AdminCatalogProcessor:
    """The catalog request codes (registered in `broker/requests.py`)."""

    def __init__(
        self,
        broker: BrokerConfig,
        store: StoreAPI,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetTable,
        clients: ClientManager,
        broker_addr: str,
    ) -> None:
        self.broker = broker
        self.store = store
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.clients = clients
        self.broker_addr = broker_addr

    # -- topics -----------------------------------------------------------------------------
    def update_and_create_topic_list(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        body = CreateTopicListRequestBody.from_json(request.body or b"{}")
        for tc in body.topic_config_list:
            problem = perm.topic_name_problem(tc.topic_name)
            if problem is None and is_system_topic(tc.topic_name):
                problem = f"The topic[{tc.topic_name}] is conflict with system topic."
            if problem is not None:
                return make_response(request, INVALID_PARAMETER, problem)
        names = ";".join(tc.topic_name for tc in body.topic_config_list)
        log.info("topics %s created/updated by %s", names, conn.remote_address)
        if body.topic_config_list:
            try:
                self.topics.update_many(body.topic_config_list)  # persists and asks for a registration
            except topic_attributes.TopicAttributeError as exc:
                return make_response(request, ResponseCode.SYSTEM_ERROR, str(exc))
        return make_response(request, ResponseCode.SUCCESS)

    def get_topic_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = GetTopicConfigRequestHeader.from_ext(request.ext_fields)
        tc = self.topics.select(header.topic)
        if tc is None:
            log.warning("no topic %s in this broker (asked by %s)", header.topic, conn.remote_address)
            return make_response(
                request, ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {header.topic}"
            )
        # TopicConfigAndQueueMapping: the topic's fields, its (5.x) attributes, no mapping detail.
        body = fastjson.dumps({"attributes": dict(tc.attributes), **tc.to_json_obj()})
        return make_response(request, ResponseCode.SUCCESS, body=body.encode("utf-8"))

    # -- groups -----------------------------------------------------------------------------
    def update_and_create_subscription_group_list(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        body = SubscriptionGroupList.from_json(request.body or b"{}")
        cfgs = [SubscriptionGroupConfig.from_json_obj(dict(obj)) for obj in body.group_config_list]
        log.info(
            "subscription groups %s created/updated by %s",
            ";".join(c.group_name for c in cfgs),
            conn.remote_address,
        )
        if cfgs:
            self.groups.update_many(cfgs)
        return make_response(request, ResponseCode.SUCCESS)

    def get_subscription_group_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = GetSubscriptionGroupConfigRequestHeader.from_ext(request.ext_fields)
        cfg = self.groups.table.get(header.group)
        if cfg is None:
            log.warning("no group %s in this broker (asked by %s)", header.group, conn.remote_address)
            code = ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
            return make_response(request, code, "No group in this broker")
        body = fastjson.dumps(cfg.to_json_obj()).encode("utf-8")
        return make_response(request, ResponseCode.SUCCESS, body=body)

    def query_topics_by_consumer(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        header = QueryTopicsByConsumerRequestHeader.from_ext(request.ext_fields)
        with self.offsets.lock:
            keys = list(self.offsets.offset_table)
        topics = sorted({t for t, _, g in (k.partition("@") for k in keys) if g == header.group})
        body = TopicList(tuple(topics), self.broker_addr).to_bytes()
        return make_response(request, ResponseCode.SUCCESS, body=body)

    def query_subscription_by_consumer(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        header = QuerySubscriptionByConsumerRequestHeader.from_ext(request.ext_fields)
        sub = self.clients.find_subscription(header.group, header.topic)
        body = QuerySubscriptionResponseBody(header.group, header.topic, sub).to_bytes()
        return make_response(request, ResponseCode.SUCCESS, body=body)

    # -- producers --------------------------------------------------------------------------
    def get_all_producer_info(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        data = {
            group: tuple(
                # Java writes the channel's remoteAddress().toString(): "/ip:port"
                ProducerInfo(i.client_id, f"/{i.conn.remote_address}", i.language, i.version, i.last_update)
                for i in table.values()
            )
            for group, table in self.clients.producers.items()
            if table
        }
        return make_response(request, ResponseCode.SUCCESS, body=ProducerTableInfo(data).to_bytes())

    # -- cleaning ---------------------------------------------------------------------------
    def clean_expired_consume_queue(self, conn: Connection, request: RemotingCommand) -> HandlerResult:
        log.info("clean expired consume queues requested by %s", conn.remote_address)
        return self._off_loop(request, lambda: self.store.clean_expired_consume_queues(is_system_topic))

    def clean_unused_topic(self, conn: Connection, request: RemotingCommand) -> HandlerResult:
        log.warning("clean unused topics requested by %s", conn.remote_address)

        def clean() -> int:
            unused = {
                t
                for t in self.store.consume_queue_topics()
                if self.topics.select(t) is None and not is_system_topic(t)
            }
            self.store.delete_topics(unused)
            return len(unused)

        return self._off_loop(request, clean)

    async def _off_loop(self, request: RemotingCommand, job: Callable[[], int]) -> RemotingCommand:
        """File deletions run off the event loop; the answer is SUCCESS, as RocketMQ's."""
        loop = asyncio.get_running_loop()
        try:
            done = await loop.run_in_executor(None, job)
        except OSError as exc:
            return make_response(request, ResponseCode.SYSTEM_ERROR, str(exc))
        log.info("cleaning deleted the consume queues of %d queue(s) or topic(s)", done)
        return make_response(request, ResponseCode.SUCCESS)
