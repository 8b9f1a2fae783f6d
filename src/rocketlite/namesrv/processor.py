"""Request handlers of the name server (`DefaultRequestProcessor.java`, 4.9.8), one per request code.

`NamesrvProcessor.request_table()` returns a `RequestTable` for `RemotingServer`. Handlers are
synchronous: every answer comes from in-memory tables (the KV file write is small and immediate).

Behaviour a client can see, and why:

- **Unknown request codes are answered REQUEST_CODE_NOT_SUPPORTED (3)**, " request type N not
  supported", as RocketMQ 5.x's name server does (its 4.x one returned null and never answered,
  so a client waited for its timeout). Clients only send codes handled here; what a broker-only
  code (HEART_BEAT, say) sent here gets is an answer at once instead of a timeout.
- **UPDATE_NAMESRV_CONFIG (318) is refused with NO_PERMISSION** and writes nothing. A remote config
  write (`configStorePath`, `kvConfigPath`) was CVE-2023-37582; configuration here is read at start.
- Route bodies use fastjson's *unquoted* numeric `brokerAddrs` keys (`{0:"ip:port"}`) unless the
  request's version is >= 401 (V4_9_4) or it sets `acceptStandardJsonOnly=true`; the Go client and
  old Java clients depend on the plain form. Every other body is plain (Java's `encode()`).
- A missing required header field raises `MissingHeaderFieldError`; the connection layer answers
  SYSTEM_ERROR with Java's remark ("the custom field <topic> is null").
- AccessKey / Signature / OnsChannel ext fields (the C++ client always signs) are ignored: header
  decoding skips unknown keys and there is no ACL on the name server.
- REGISTER_BROKER checks `bodyCrc32` when it is non-zero. The value is `UtilAll.crc32(body)`, which
  masks the CRC to 31 bits (`crc & 0x7FFFFFFF`); `register_body_crc32` computes it for brokers.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Final

from rocketlite.namesrv.config import NamesrvConfig
from rocketlite.namesrv.kv_config import NAMESPACE_ORDER_TOPIC_CONFIG, KVConfigManager
from rocketlite.namesrv.route_info import RouteInfoManager
from rocketlite.protocol.bodies.lists import TopicList
from rocketlite.protocol.bodies.route import (
    DataVersion,
    RegisterBrokerBody,
    TopicConfigSerializeWrapper,
    register_body_crc32,
)
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.wire.command import RemotingCommand, make_response
from rocketlite.protocol.wire.headers import (
    AddWritePermOfBrokerRequestHeader,
    AddWritePermOfBrokerResponseHeader,
    DeleteKVConfigRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetKVConfigRequestHeader,
    GetKVConfigResponseHeader,
    GetKVListByNamespaceRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    PutKVConfigRequestHeader,
    QueryDataVersionRequestHeader,
    QueryDataVersionResponseHeader,
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
)
from rocketlite.remoting.connection import Connection, RequestTable, not_supported

log = logging.getLogger("rocketlite.namesrv.processor")

STANDARD_JSON_MIN_VERSION: Final = 401  # MQVersion.V4_9_4.ordinal()
FAQ_SUFFIX: Final = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."  # FAQUrl.suggestTodo


def _ok(
    request: RemotingCommand, body: bytes | None = None, ext: dict[str, str] | None = None
) -> RemotingCommand:
    return make_response(request, ResponseCode.SUCCESS, None, ext, body)


class NamesrvProcessor:
    """Binds the handlers to one name server's route table, KV store and config."""

    def __init__(
        self, config: NamesrvConfig, route_info: RouteInfoManager, kv_config: KVConfigManager
    ) -> None:
        self.config = config
        self.route_info = route_info
        self.kv_config = kv_config

    def request_table(self) -> RequestTable:
        """Every code the name server serves; any other is answered REQUEST_CODE_NOT_SUPPORTED."""
        table = RequestTable(default=not_supported)
        handlers: dict[RequestCode, Callable[[Connection, RemotingCommand], RemotingCommand | None]] = {
            RequestCode.PUT_KV_CONFIG: self.put_kv_config,
            RequestCode.GET_KV_CONFIG: self.get_kv_config,
            RequestCode.DELETE_KV_CONFIG: self.delete_kv_config,
            RequestCode.QUERY_DATA_VERSION: self.query_data_version,
            RequestCode.REGISTER_BROKER: self.register_broker,
            RequestCode.UNREGISTER_BROKER: self.unregister_broker,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self.get_route_info_by_topic,
            RequestCode.GET_BROKER_CLUSTER_INFO: self.get_broker_cluster_info,
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: self.wipe_write_perm_of_broker,
            RequestCode.ADD_WRITE_PERM_OF_BROKER: self.add_write_perm_of_broker,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.get_all_topic_list,
            RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic_in_namesrv,
            RequestCode.GET_KVLIST_BY_NAMESPACE: self.get_kvlist_by_namespace,
            RequestCode.GET_TOPICS_BY_CLUSTER: self.get_topics_by_cluster,
            RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: self.get_system_topic_list,
            RequestCode.GET_UNIT_TOPIC_LIST: self.get_unit_topic_list,
            RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: self.get_has_unit_sub_topic_list,
            RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: self.get_has_unit_sub_ununit_topic_list,
            RequestCode.UPDATE_NAMESRV_CONFIG: self.update_namesrv_config,
            RequestCode.GET_NAMESRV_CONFIG: self.get_namesrv_config,
        }
        for code, handler in handlers.items():
            table.register(code, handler)
        return table

    # -- brokers ----------------------------------------------------------------------------
    def register_broker(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = RegisterBrokerRequestHeader.from_ext(request.ext_fields)
        if header.body_crc32 != 0 and register_body_crc32(request.body) != header.body_crc32:
            log.warning(
                "register from %s (%s): body crc32 %d does not match header %d",
                conn.remote_address,
                header.broker_addr,
                register_body_crc32(request.body),
                header.body_crc32,
            )
            return make_response(request, ResponseCode.SYSTEM_ERROR, "crc32 not match")
        wrapper = TopicConfigSerializeWrapper()
        filter_servers: tuple[str, ...] = ()
        if request.body:
            try:
                body = RegisterBrokerBody.decode(request.body, compressed=header.compressed)
            except ProtocolError as exc:
                raise ProtocolError(f"Failed to decode RegisterBrokerBody: {exc}") from exc
            wrapper = body.topic_config_serialize_wrapper
            filter_servers = body.filter_server_list
        result = self.route_info.register_broker(
            header.cluster_name,
            header.broker_addr,
            header.broker_name,
            header.broker_id,
            header.ha_server_addr,
            wrapper,
            filter_servers,
            conn,
        )
        ext = RegisterBrokerResponseHeader(
            ha_server_addr=result.ha_server_addr, master_addr=result.master_addr
        ).to_ext()
        return _ok(request, self.kv_config.namespace_body(NAMESPACE_ORDER_TOPIC_CONFIG), ext)

    def unregister_broker(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        header = UnregisterBrokerRequestHeader.from_ext(request.ext_fields)
        self.route_info.unregister_broker(
            header.cluster_name, header.broker_addr, header.broker_name, header.broker_id
        )
        return _ok(request)

    def query_data_version(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        header = QueryDataVersionRequestHeader.from_ext(request.ext_fields)
        if not request.body:
            raise ProtocolError("QUERY_DATA_VERSION needs a DataVersion body")
        changed = self.route_info.query_data_version(header.broker_addr, DataVersion.from_json(request.body))
        current = self.route_info.broker_data_version(header.broker_addr)
        return _ok(
            request,
            None if current is None else current.to_bytes(),
            QueryDataVersionResponseHeader(changed=changed).to_ext(),
        )

    # -- routes -----------------------------------------------------------------------------
    def get_route_info_by_topic(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        header = GetRouteInfoRequestHeader.from_ext(request.ext_fields)
        route = self.route_info.pick_topic_route(header.topic)
        if route is None:
            return make_response(
                request,
                ResponseCode.TOPIC_NOT_EXIST,
                f"No topic route info in name server for the topic: {header.topic}{FAQ_SUFFIX}",
            )
        if self.config.order_message_enable:
            order_conf = self.kv_config.get(NAMESPACE_ORDER_TOPIC_CONFIG, header.topic)
            route = dataclasses.replace(route, order_topic_conf=order_conf)
        standard = request.version >= STANDARD_JSON_MIN_VERSION or header.accept_standard_json_only is True
        return _ok(request, route.to_bytes(standard=standard))

    def get_broker_cluster_info(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        return _ok(request, self.route_info.cluster_info().to_bytes())

    def wipe_write_perm_of_broker(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = WipeWritePermOfBrokerRequestHeader.from_ext(request.ext_fields)
        count = self.route_info.wipe_write_perm(header.broker_name)
        log.info(
            "wipe write perm of broker %s from %s: %d topics", header.broker_name, conn.remote_address, count
        )
        return _ok(request, ext=WipeWritePermOfBrokerResponseHeader(wipe_topic_count=count).to_ext())

    def add_write_perm_of_broker(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = AddWritePermOfBrokerRequestHeader.from_ext(request.ext_fields)
        count = self.route_info.add_write_perm(header.broker_name)
        log.info(
            "add write perm of broker %s from %s: %d topics", header.broker_name, conn.remote_address, count
        )
        return _ok(request, ext=AddWritePermOfBrokerResponseHeader(add_topic_count=count).to_ext())

    def delete_topic_in_namesrv(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        header = DeleteTopicFromNamesrvRequestHeader.from_ext(request.ext_fields)
        log.info(
            "delete topic %s (cluster %s) from %s", header.topic, header.cluster_name, conn.remote_address
        )
        self.route_info.delete_topic(header.topic, header.cluster_name or None)
        return _ok(request)

    # -- topic lists ------------------------------------------------------------------------
    def get_all_topic_list(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        return _ok(request, TopicList(tuple(self.route_info.all_topics())).to_bytes())

    def get_topics_by_cluster(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        header = GetTopicsByClusterRequestHeader.from_ext(request.ext_fields)
        return _ok(request, TopicList(tuple(self.route_info.topics_by_cluster(header.cluster))).to_bytes())

    def get_system_topic_list(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        topics, broker_addr = self.route_info.system_topics()
        return _ok(request, TopicList(tuple(topics), broker_addr).to_bytes())

    def get_unit_topic_list(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        return _ok(request, TopicList(tuple(self.route_info.unit_topics())).to_bytes())

    def get_has_unit_sub_topic_list(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        return _ok(request, TopicList(tuple(self.route_info.has_unit_sub_topics())).to_bytes())

    def get_has_unit_sub_ununit_topic_list(
        self, conn: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        del conn
        return _ok(request, TopicList(tuple(self.route_info.has_unit_sub_ununit_topics())).to_bytes())

    # -- KV config --------------------------------------------------------------------------
    def put_kv_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        header = PutKVConfigRequestHeader.from_ext(request.ext_fields)
        self.kv_config.put(header.namespace, header.key, header.value)
        return _ok(request)

    def get_kv_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        header = GetKVConfigRequestHeader.from_ext(request.ext_fields)
        value = self.kv_config.get(header.namespace, header.key)
        if value is None:
            return make_response(
                request,
                ResponseCode.QUERY_NOT_FOUND,
                f"No config item, Namespace: {header.namespace} Key: {header.key}",
            )
        return _ok(request, ext=GetKVConfigResponseHeader(value=value).to_ext())

    def delete_kv_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        header = DeleteKVConfigRequestHeader.from_ext(request.ext_fields)
        self.kv_config.delete(header.namespace, header.key)
        return _ok(request)

    def get_kvlist_by_namespace(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        header = GetKVListByNamespaceRequestHeader.from_ext(request.ext_fields)
        body = self.kv_config.namespace_body(header.namespace)
        if body is None:
            return make_response(
                request, ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {header.namespace}"
            )
        return _ok(request, body)

    # -- name server config -----------------------------------------------------------------
    def update_namesrv_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        log.warning(
            "refused UPDATE_NAMESRV_CONFIG from %s: config is never written remotely", conn.remote_address
        )
        return make_response(
            request,
            ResponseCode.NO_PERMISSION,
            "Can not update name server config remotely; edit the config file and restart",
        )

    def get_namesrv_config(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        """Java properties text (`key=value` lines), as `MixAll.properties2String` writes it."""
        del conn
        lines = [f"{key}={value}\n" for key, value in sorted(self.config.to_properties().items())]
        return _ok(request, "".join(lines).encode("utf-8"))
