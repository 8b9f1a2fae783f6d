"""Requests about clients: HEART_BEAT (34), UNREGISTER_CLIENT (35), GET_CONSUMER_LIST_BY_GROUP (38),
GET_CONSUMER_CONNECTION_LIST (203), GET_PRODUCER_CONNECTION_LIST (204), CHECK_CLIENT_CONFIG (46).

RocketMQ's `ClientManageProcessor` plus the connection-list admin requests: each handler parses
the request, asks or tells `ClientManager` (the producer and consumer tables, `client_manager.py`),
and answers as a 4.9 broker does.
"""

from __future__ import annotations

import logging

from rocketlite.broker.client_manager import ClientManager
from rocketlite.broker.consumer_filter import compile_expression
from rocketlite.protocol.bodies.heartbeat import HeartbeatData, SubscriptionData
from rocketlite.protocol.bodies.json_body import expect_obj
from rocketlite.protocol.bodies.lists import ConsumerListBody
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.errors import RocketliteError
from rocketlite.protocol.subscription import is_tag_type
from rocketlite.protocol.wire import fastjson
from rocketlite.protocol.wire.command import RemotingCommand, make_response
from rocketlite.protocol.wire.custom_header import MissingHeaderFieldError
from rocketlite.protocol.wire.headers import (
    GetConsumerConnectionListRequestHeader,
    GetConsumerListByGroupRequestHeader,
    UnregisterClientRequestHeader,
)
from rocketlite.remoting.connection import Connection

log = logging.getLogger("rocketlite.broker.client")


class ClientRequestProcessor:
    """The client-table request codes; the tables themselves are the `ClientManager`'s."""

    def __init__(self, clients: ClientManager) -> None:
        self.clients = clients

    def handle_heartbeat(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """HEART_BEAT (34): `ClientManageProcessor.heartBeat`."""
        data = HeartbeatData.from_json(request.body or b"")
        self.clients.heartbeat(conn, data, request.language, request.version)
        return make_response(request, ResponseCode.SUCCESS)

    def handle_unregister(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """UNREGISTER_CLIENT (35): remove the clientID from the named producer / consumer group."""
        del conn
        header = UnregisterClientRequestHeader.from_ext(request.ext_fields)
        self.clients.unregister(header.client_id, header.producer_group, header.consumer_group)
        return make_response(request, ResponseCode.SUCCESS)

    def handle_consumer_list(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """GET_CONSUMER_LIST_BY_GROUP (38): the exact clientIDs of the group's live clients."""
        header = GetConsumerListByGroupRequestHeader.from_ext(request.ext_fields)
        info = self.clients.consumers.get(header.consumer_group)
        ids = info.client_ids() if info is not None else []
        if not ids:
            log.warning("no consumer for group %s (asked by %s)", header.consumer_group, conn.remote_address)
            return make_response(
                request, ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {header.consumer_group}"
            )
        return make_response(request, ResponseCode.SUCCESS, body=ConsumerListBody(tuple(ids)).to_bytes())

    def handle_consumer_connections(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """GET_CONSUMER_CONNECTION_LIST (203): `ConsumerConnection` of an online group."""
        del conn
        header = GetConsumerConnectionListRequestHeader.from_ext(request.ext_fields)
        info = self.clients.consumers.get(header.consumer_group)
        if info is None:
            return make_response(
                request,
                ResponseCode.CONSUMER_NOT_ONLINE,
                f"the consumer group[{header.consumer_group}] not online",
            )
        body = fastjson.dumps(info.to_consumer_connection_json()).encode("utf-8")
        return make_response(request, ResponseCode.SUCCESS, body=body)

    def handle_producer_connections(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """GET_PRODUCER_CONNECTION_LIST (204): `ProducerConnection` of a producer group."""
        del conn
        group = request.ext_fields.get("producerGroup")
        if group is None:
            raise MissingHeaderFieldError("producerGroup")
        table = self.clients.producers.get(group)
        if not table:
            return make_response(request, ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist")
        body = {"connectionSet": [i.to_connection_json() for i in table.values()]}
        return make_response(request, ResponseCode.SUCCESS, body=fastjson.dumps(body).encode("utf-8"))

    def handle_check_client_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """CHECK_CLIENT_CONFIG (46), which the Java push consumer sends at start for a subscription
        that is not a tag expression: TAG passes; SQL92 is refused without `enablePropertyFilter`
        (SYSTEM_ERROR) and must compile (SUBSCRIPTION_PARSE_FAILED, the remark naming the error),
        as `ClientManageProcessor.checkClientConfig` does."""
        del conn
        if request.body:
            obj = expect_obj(fastjson.loads(request.body), "CheckClientRequestBody")
            raw_sub = obj.get("subscriptionData")
            if raw_sub is not None:
                sub = SubscriptionData.from_json_obj(expect_obj(raw_sub, "subscriptionData"))
                if not is_tag_type(sub.expression_type):
                    if not self.clients.broker.enable_property_filter:
                        raise RocketliteError(
                            f"The broker does not support consumer to filter message by {sub.expression_type}"
                        )
                    try:
                        compile_expression(sub.expression_type, sub.sub_string)
                    except RocketliteError as exc:
                        log.warning("client %s of %s: %s", obj.get("clientId"), obj.get("group"), exc.remark)
                        return make_response(request, exc.code, exc.remark)
        return make_response(request, ResponseCode.SUCCESS)
