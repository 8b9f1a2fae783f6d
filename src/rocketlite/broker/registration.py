"""`NameServerRegistrar`: the broker's registration with every name server (REGISTER_BROKER).

A broker registers once it serves, then every `registerNameServerPeriod`, and at once when its
topics change (`request_register`, callable from any thread: the topic manager, HA's replication
thread and live config changes all call it). A failed registration is retried after
`REGISTER_RETRY_S`, not a whole period later, because a slave learns its master's addresses only
from the answer of a name server the master has already registered with. On close it sends
UNREGISTER_BROKER to each name server.

The registration body masks every topic's permission with `brokerPermission`, as Java's
`registerBrokerAll` does, so a broker made read-only (or write-only) is routed as such.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Callable

from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.topic_config import TopicConfigManager
from rocketlite.protocol import perm
from rocketlite.protocol.bodies.route import (
    RegisterBrokerBody,
    TopicConfigSerializeWrapper,
    TopicRouteData,
    register_body_crc32,
)
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.requests.response import ResponseError
from rocketlite.protocol.requests.route import build_get_route, parse_route
from rocketlite.protocol.wire.command import make_request
from rocketlite.protocol.wire.headers import (
    RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader,
    UnregisterBrokerRequestHeader,
)
from rocketlite.remoting.client import RemotingClient
from rocketlite.runtime import wait_event

log = logging.getLogger("rocketlite.broker")

REGISTER_RETRY_S = 3.0  # after a failed registration
UNREGISTER_TIMEOUT_S = 3.0
ROUTE_TIMEOUT_S = 3.0


class NameServerRegistrar:
    """Registers one broker with its name servers; owns the `broker-register` task."""

    def __init__(
        self,
        broker: BrokerConfig,
        topics: TopicConfigManager,
        outbound: RemotingClient,
        address: Callable[[], str],
        ha_address: Callable[[], str],
    ) -> None:
        self.broker = broker
        self.topics = topics
        self.outbound = outbound
        self.address = address  # the bound remoting address, known once the server is bound
        self.ha_address = ha_address
        # A slave learns its master's addresses from each answer (set by the controller).
        self.on_result: Callable[[RegisterBrokerResponseHeader], None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._soon = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.closed = False

    def request_register(self) -> None:
        """Register with the name servers at once (from any thread); a no-op before start."""
        loop = self._loop
        if loop is not None and not self.closed:
            loop.call_soon_threadsafe(self._soon.set)

    def request(self) -> tuple[RegisterBrokerRequestHeader, bytes]:
        """The REGISTER_BROKER header and body for the broker's current topics."""
        wrapper = self.topics.wrapper()
        broker_perm = self.broker.broker_permission
        if not (perm.is_readable(broker_perm) and perm.is_writeable(broker_perm)):
            wrapper = TopicConfigSerializeWrapper(
                {name: dataclasses.replace(tc, perm=tc.perm & broker_perm)
                 for name, tc in wrapper.topic_config_table.items()},
                wrapper.data_version,
            )  # fmt: skip
        body = RegisterBrokerBody(wrapper).encode()
        header = RegisterBrokerRequestHeader(
            broker_name=self.broker.broker_name,
            broker_addr=self.address(),
            cluster_name=self.broker.broker_cluster_name,
            ha_server_addr=self.ha_address(),
            broker_id=self.broker.broker_id,
            compressed=False,
            body_crc32=register_body_crc32(body),
        )
        return header, body

    async def register_all(self) -> bool:
        """Register with every name server; True if all accepted."""
        header, body = self.request()
        ok = True
        timeout = self.broker.register_broker_timeout_mills / 1000
        for addr in self.broker.namesrv_addrs:
            request = make_request(RequestCode.REGISTER_BROKER, header.to_ext(), body)
            try:
                response = await self.outbound.invoke(addr, request, timeout)
            except (OSError, TimeoutError) as exc:
                log.warning("register to name server %s failed: %s", addr, exc)
                ok = False
                continue
            if response.code != ResponseCode.SUCCESS:
                log.warning("name server %s refused registration: %s", addr, response.remark)
                ok = False
                continue
            if self.on_result is not None:
                self.on_result(RegisterBrokerResponseHeader.from_ext(response.ext_fields))
        return ok

    async def route_of(self, topic: str) -> TopicRouteData | None:
        """The topic's route from the first name server that answers; None when it does not know
        the topic (QUERY_ASSIGNMENT's view of a topic's queues over every broker)."""
        failure: Exception = OSError("no name server configured")
        for addr in self.broker.namesrv_addrs:
            try:
                response = await self.outbound.invoke(addr, build_get_route(topic), ROUTE_TIMEOUT_S)
                return parse_route(response)
            except (OSError, TimeoutError, ResponseError) as exc:
                failure = exc
        raise OSError(f"no name server gave the route of {topic}: {failure}")

    async def start(self) -> None:
        """The first registration, then the periodic loop (nothing without name servers)."""
        self._loop = asyncio.get_running_loop()
        if not self.broker.namesrv_addrs:
            return
        registered = await self.register_all()
        self._task = asyncio.create_task(self._loop_forever(registered), name="broker-register")

    async def _loop_forever(self, registered: bool) -> None:
        period = self.broker.effective_register_period_ms / 1000
        while True:
            wait = period if registered else min(period, REGISTER_RETRY_S)
            await wait_event(self._soon, wait)
            self._soon.clear()
            try:
                registered = await self.register_all()
            except Exception:
                registered = False
                log.exception("registration failed")

    def cancel(self) -> None:
        """Stop the loop (first step of the broker's close)."""
        self.closed = True
        if self._task is not None:
            self._task.cancel()

    async def unregister_all(self) -> None:
        """UNREGISTER_BROKER to every name server; an unreachable one is skipped."""
        header = UnregisterBrokerRequestHeader(
            broker_name=self.broker.broker_name,
            broker_addr=self.address(),
            cluster_name=self.broker.broker_cluster_name,
            broker_id=self.broker.broker_id,
        )
        for addr in self.broker.namesrv_addrs:
            with contextlib.suppress(OSError, TimeoutError):
                await self.outbound.invoke(
                    addr,
                    make_request(RequestCode.UNREGISTER_BROKER, header.to_ext()),
                    UNREGISTER_TIMEOUT_S,
                )
