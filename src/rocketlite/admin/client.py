"""`AdminClient`: the request/response plumbing every admin verb shares.

The verbs talk to two kinds of servers over plain `RemotingClient` requests, the way mqadmin's
`DefaultMQAdminExt` does: the name server for routes, cluster layout, topic lists and KV entries,
and each broker (found through the name server) for everything else. This layer exists so the
verbs never see transport details:

- a broker or name server answering with an error code becomes `AdminError("<remark> (NAME, code N)")`,
  which the top-level CLI prints as `rocketlite: error: ...`;
- a server that cannot be reached (refused, timed out, connection dropped) becomes an
  `AdminError` that names the address and the role ("cannot reach name server 127.0.0.1:9876:
  connection refused"), instead of a bare errno;
- `-n "a:9876;b:9876"` lists several name servers; reads go to the first that answers (mqadmin
  picks one too), writes that every name server must see (`deleteTopic`) go to all;
- with `credentials` (ACL keys, see `rocketlite.admin.credentials`) every request is signed, as
  mqadmin's `AclClientRPCHook` does; a broker's NO_PERMISSION (16) becomes
  `AdminError("<remark> (NO_PERMISSION, code 16)")`, with a hint about the keys when none were given.

It is not a client SDK: there is no heartbeat, no route cache and no retry, because an admin
command is one short conversation.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, replace
from types import TracebackType
from typing import Any, Final, Protocol, TypeVar

from rocketlite.protocol.bodies.route import ClusterInfo, TopicRouteData
from rocketlite.protocol.codes import RequestCode, ResponseCode, not_a_namesrv, response_label
from rocketlite.protocol.errors import RocketliteError
from rocketlite.protocol.requests.response import ResponseError
from rocketlite.protocol.requests.route import (
    build_get_all_topics,
    build_get_route,
    parse_route,
    parse_topic_list,
)
from rocketlite.protocol.reserved import MASTER_ID
from rocketlite.protocol.wire.acl_signature import SessionCredentials
from rocketlite.protocol.wire.command import RemotingCommand, make_request
from rocketlite.protocol.wire.headers import GetKVConfigResponseHeader

DEFAULT_TIMEOUT_S: Final = 5.0
ROUTE_WAIT_S: Final = 3.0  # how long updateTopic waits for the name server to show the new route
T = TypeVar("T")
NO_KEYS_HINT: Final = (
    "the broker checks ACL: pass --access-key and --secret-key, "
    "or set accessKey and secretKey in $ROCKETMQ_HOME/conf/tools.yml"
)


class AdminError(RocketliteError):
    """A verb failed; `response_code` is the server's code when a server refused."""

    def __init__(self, message: str, response_code: int | None = None, *, hint: str | None = None) -> None:
        text = message if response_code is None else f"{message} ({response_label(response_code)})"
        super().__init__(text if hint is None else f"{text}; {hint}")
        self.response_code = response_code


class UsageError(AdminError):
    """The arguments are wrong in a way argparse cannot see (a flag that needs another, a value
    that is checked late); the CLI shows it like argparse's own: the verb's usage, exit 2."""


class NotOnlineError(AdminError):
    """Nobody of the group is connected: an answer, not a failure; the CLI prints it and exits 1
    (the broker's CONSUMER_NOT_ONLINE / SYSTEM_ERROR refusal is kept on the wire)."""


class NamesrvRequiredError(AdminError):
    """The verb needs a name server and none was given; the CLI shows it as a usage error (exit 2).

    Verbs given a broker address (`brokerStatus -b`, `getBrokerConfig -b`, ...) talk to that
    broker alone, so NAMESRV_ADDR is only demanded when a name server is really asked."""

    def __init__(self) -> None:
        super().__init__("the name server is needed: give -n HOST:PORT or set NAMESRV_ADDR")


class Reporter(Protocol):
    """Progress for long operations; `task` yields a function advancing the bar by n steps."""

    def task(
        self, description: str, total: int
    ) -> contextlib.AbstractContextManager[Callable[[int], None]]: ...


def _ignore(steps: int) -> None:
    del steps


class NullReporter:
    """No progress output (JSON mode, pipes, tests)."""

    @contextlib.contextmanager
    def task(self, description: str, total: int) -> Iterator[Callable[[int], None]]:
        del description, total
        yield _ignore


@dataclass(frozen=True, slots=True)
class BrokerTarget:
    """One broker a verb writes to: names for the output, the address for the request."""

    cluster: str
    broker_name: str
    addr: str

    def to_json(self) -> dict[str, str]:
        return {"cluster": self.cluster, "brokerName": self.broker_name, "brokerAddr": self.addr}


def split_addresses(text: str) -> list[str]:
    """`"a:9876;b:9876"` -> ["a:9876", "b:9876"] (mqadmin's separator; blanks dropped)."""
    return [part.strip() for part in text.replace(",", ";").split(";") if part.strip()]


def describe_failure(exc: BaseException, timeout: float) -> str:
    """A short reason for a transport failure, for the error line."""
    if isinstance(exc, TimeoutError):
        return f"no answer within {timeout:g} s"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return str(exc) or type(exc).__name__


def code_name(code: int) -> str:
    try:
        return RequestCode(code).name
    except ValueError:
        return f"request {code}"


def check_response(
    response: RemotingCommand, ok: Collection[int], what: str, *, signed: bool = False
) -> RemotingCommand:
    """`response`, or an AdminError with its remark and code (`signed`: the request carried keys)."""
    if response.code in ok:
        return response
    message = response.remark or f"{what} failed"
    if response.code == ResponseCode.NO_PERMISSION:
        hint = None if signed else NO_KEYS_HINT
        raise AdminError(message, response.code, hint=hint)
    raise AdminError(message, response.code)


class AdminClient:
    """Requests to the name servers in `namesrv` (";"-separated) and to the brokers they name."""

    def __init__(
        self,
        namesrv: str | None,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        reporter: Reporter | None = None,
        credentials: SessionCredentials | None = None,
    ) -> None:
        from rocketlite.remoting.client import RemotingClient  # noqa: PLC0415 - keeps --help fast

        self.namesrv_addrs = split_addresses(namesrv or "")  # none: NamesrvRequiredError when asked
        self.timeout = timeout
        self.credentials = credentials
        self.reporter: Reporter = reporter or NullReporter()
        self.remoting = RemotingClient(connect_timeout=timeout)
        self._cluster_info: ClusterInfo | None = None

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self.remoting.close()

    # -- requests ---------------------------------------------------------------------------
    def _transport_error(self, addr: str, role: str, exc: Exception) -> AdminError:
        if isinstance(exc, ValueError):  # "host" without a port, a port that is not a number
            return AdminError(f"bad {role} address {addr!r}: expected host:port")
        self.remoting.close_address(addr)
        return AdminError(f"cannot reach {role} {addr}: {describe_failure(exc, self.timeout)}")

    async def local_ip(self, addr: str) -> bytes:
        """Our IPv4 address on the connection to `addr` (what a client puts in its UNIQ_KEY);
        127.0.0.1 when the connection is not over IPv4."""
        try:
            conn = await self.remoting.connection(addr)
        except (OSError, TimeoutError, ValueError) as exc:
            raise self._transport_error(addr, "broker", exc) from exc
        sockname: Any = conn.transport.get_extra_info("sockname") if conn.transport is not None else None
        try:
            return socket.inet_aton(str(sockname[0]))
        except (OSError, TypeError, IndexError):
            return bytes((127, 0, 0, 1))

    async def request(
        self,
        addr: str,
        code: int,
        ext: Mapping[str, str] | None = None,
        body: bytes | None = None,
        *,
        role: str = "broker",
    ) -> RemotingCommand:
        """One request (signed with `credentials`, if any); transport failures become an AdminError
        naming `role` and `addr`."""
        return await self.invoke(addr, make_request(code, ext, body), role=role)

    async def invoke(self, addr: str, cmd: RemotingCommand, *, role: str = "broker") -> RemotingCommand:
        """Send a built command (a copy, signed); transport failures become an AdminError."""
        cmd = replace(cmd, ext_fields=dict(cmd.ext_fields))  # each send signs and numbers its own
        if self.credentials is not None:
            self.credentials.sign_request(cmd)
        try:
            return await self.remoting.invoke(addr, cmd, self.timeout)
        except (OSError, TimeoutError, ValueError) as exc:
            raise self._transport_error(addr, role, exc) from exc

    def parsed(self, response: RemotingCommand, parse: Callable[[RemotingCommand], T], what: int) -> T:
        """`parse(response)` (a `protocol.requests` parser); a refusal becomes the AdminError
        `call` raises, with the remark, the code and the ACL hint."""
        try:
            return parse(response)
        except ResponseError:
            check_response(response, (), code_name(what), signed=self.credentials is not None)
            raise  # not reached: check_response raises for every code when nothing is ok

    async def ask(
        self, addr: str, cmd: RemotingCommand, parse: Callable[[RemotingCommand], T], *, role: str = "broker"
    ) -> T:
        """Send a `protocol.requests` command and parse the answer (errors as `call` raises them)."""
        return self.parsed(await self.invoke(addr, cmd, role=role), parse, cmd.code)

    async def call(
        self,
        addr: str,
        code: int,
        ext: Mapping[str, str] | None = None,
        body: bytes | None = None,
        *,
        ok: Collection[int] = (ResponseCode.SUCCESS,),
        role: str = "broker",
    ) -> RemotingCommand:
        """`request`, and an AdminError with the server's remark and code unless the code is in `ok`."""
        response = await self.request(addr, code, ext, body, role=role)
        return check_response(response, ok, code_name(code), signed=self.credentials is not None)

    async def namesrv_call(
        self,
        code: int,
        ext: Mapping[str, str] | None = None,
        body: bytes | None = None,
        *,
        ok: Collection[int] = (ResponseCode.SUCCESS,),
    ) -> RemotingCommand:
        """Ask the name servers in order until one answers; an error answer is final."""
        response = await self._first_namesrv(make_request(code, ext, body))
        return check_response(response, ok, code_name(code), signed=self.credentials is not None)

    async def namesrv_ask(self, cmd: RemotingCommand, parse: Callable[[RemotingCommand], T]) -> T:
        """`ask` the first name server that answers."""
        return self.parsed(await self._first_namesrv(cmd), parse, cmd.code)

    async def _first_namesrv(self, cmd: RemotingCommand) -> RemotingCommand:
        if not self.namesrv_addrs:
            raise NamesrvRequiredError
        failures: list[str] = []
        for addr in self.namesrv_addrs:
            try:
                response = await self.invoke(addr, cmd, role="name server")
            except AdminError as exc:
                failures.append(str(exc))
                continue
            if response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                failures.append(not_a_namesrv(addr, cmd.code))  # a broker's port given as -n
                continue
            return response
        raise AdminError("; ".join(failures))

    async def each_namesrv(
        self, code: int, ext: Mapping[str, str] | None = None, body: bytes | None = None
    ) -> list[str]:
        """Send to every name server (writes they must all see); returns the addresses done."""
        if not self.namesrv_addrs:
            raise NamesrvRequiredError
        for addr in self.namesrv_addrs:
            response = await self.request(addr, code, ext, body, role="name server")
            if response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                raise AdminError(not_a_namesrv(addr, code))
            check_response(
                response, (ResponseCode.SUCCESS,), code_name(code), signed=self.credentials is not None
            )
        return list(self.namesrv_addrs)

    # -- name server queries ----------------------------------------------------------------
    async def cluster_info(self, *, refresh: bool = False) -> ClusterInfo:
        if self._cluster_info is None or refresh:
            response = await self.namesrv_call(RequestCode.GET_BROKER_CLUSTER_INFO)
            self._cluster_info = ClusterInfo.from_json(response.body or b"{}")
        return self._cluster_info

    async def topic_route_or_none(self, topic: str) -> TopicRouteData | None:
        return await self.namesrv_ask(build_get_route(topic), parse_route)

    async def topic_route(self, topic: str) -> TopicRouteData:
        route = await self.topic_route_or_none(topic)
        if route is None:
            raise AdminError(
                f"No topic route info in name server for the topic: {topic}", ResponseCode.TOPIC_NOT_EXIST
            )
        return route

    async def all_topics(self) -> list[str]:
        return await self.namesrv_ask(build_get_all_topics(), parse_topic_list)

    async def get_kv(self, namespace: str, key: str) -> str | None:
        response = await self.namesrv_call(
            RequestCode.GET_KV_CONFIG,
            {"namespace": namespace, "key": key},
            ok=(ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND),
        )
        if response.code != ResponseCode.SUCCESS:
            return None
        return GetKVConfigResponseHeader.from_ext(response.ext_fields).value

    # -- brokers ----------------------------------------------------------------------------
    async def masters(self, cluster: str | None = None) -> list[BrokerTarget]:
        """Master brokers (of one cluster, or all), sorted by cluster and name."""
        info = await self.cluster_info()
        if cluster is not None and cluster not in info.cluster_addr_table:
            known = ", ".join(sorted(info.cluster_addr_table)) or "none"
            raise AdminError(f"cluster {cluster!r} not found in the name server (known: {known})")
        out: list[BrokerTarget] = []
        for name in sorted(info.broker_addr_table):
            data = info.broker_addr_table[name]
            if cluster is not None and data.cluster != cluster:
                continue
            master = data.broker_addrs.get(MASTER_ID)
            if master is not None:
                out.append(BrokerTarget(data.cluster, name, master))
        return sorted(out, key=lambda t: (t.cluster, t.broker_name))

    async def targets(self, broker_addr: str | None, cluster: str | None) -> list[BrokerTarget]:
        """mqadmin's `-b brokerAddr | -c clusterName`: that broker, or every master of the cluster."""
        if broker_addr is not None:
            if not self.namesrv_addrs:  # -b alone: the broker is all a write needs
                return [BrokerTarget("", broker_addr, broker_addr)]
            info = await self.cluster_info()
            for name, data in info.broker_addr_table.items():
                if broker_addr in data.broker_addrs.values():
                    return [BrokerTarget(data.cluster, name, broker_addr)]
            return [BrokerTarget("", broker_addr, broker_addr)]
        targets = await self.masters(cluster)
        if not targets:
            raise AdminError(f"cluster {cluster!r} has no master broker")
        return targets

    async def broker_addr(self, broker_name: str) -> str:
        """Master address of a broker name (from the cluster info)."""
        info = await self.cluster_info()
        data = info.broker_addr_table.get(broker_name)
        addr = data.broker_addrs.get(MASTER_ID) if data is not None else None
        if addr is None:
            raise AdminError(f"broker {broker_name!r} has no master in the name server")
        return addr

    async def known_broker_addrs(self) -> set[str]:
        info = await self.cluster_info()
        return {a for data in info.broker_addr_table.values() for a in data.broker_addrs.values()}

    async def wait_for_route(
        self, topic: str, broker_names: Collection[str], predicate: RoutePredicate
    ) -> bool:
        """Poll the name server until every broker in `broker_names` shows `topic` as `predicate`
        wants (brokers re-register right after a topic change); False after ROUTE_WAIT_S."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + ROUTE_WAIT_S
        while True:
            route = await self.topic_route_or_none(topic)
            if predicate(route, broker_names):
                return True
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(0.05)


RoutePredicate = Callable[[TopicRouteData | None, Collection[str]], bool]
