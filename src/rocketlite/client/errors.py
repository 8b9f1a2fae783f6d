"""Client errors: one root (`ClientError`), subclasses carrying the RocketMQ response code.

The Java client throws `MQBrokerException` (the broker answered with a code), `RemotingException`
(timeout, connect, closed channel) and `MQClientException` (client-side misuse, no route). Here
they share one root, a `RocketliteError`, so callers catch one type; each error knows

* `response_code`: the wire code (an int, since brokers may send codes this enum does not know),
* `retriable`: whether sending the same request again, possibly to another broker, may succeed.

`for_code(code, remark)` maps a response to the registered subclass. The retriable set follows
`DefaultMQProducer.retryResponseCodes` (17, 14, 1, 16, 204, 205) plus SYSTEM_BUSY (2) and
FLOW_CONTROL (215), which are retried with backoff; timeouts and broken connections are retriable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar, TypeVar

from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.errors import RocketliteError
from rocketlite.protocol.requests.response import ResponseError
from rocketlite.protocol.wire.command import RemotingCommand

__all__ = [
    "BrokerError",
    "BrokerSystemError",
    "ClientError",
    "ClientStateError",
    "FlowControlError",
    "MessageIllegalError",
    "NoPermissionError",
    "NoRouteError",
    "QueryNotFoundError",
    "RemotingConnectError",
    "RemotingError",
    "RemotingTimeoutError",
    "ServiceNotAvailableError",
    "SubscriptionGroupNotExistError",
    "SubscriptionNotExistError",
    "SubscriptionParseError",
    "SystemBusyError",
    "TopicNotExistError",
    "for_code",
    "parse_answer",
    "transport_reason",
]

T = TypeVar("T")


class ClientError(RocketliteError):
    """Root of every error the client raises; `response_code` is the wire code (or 1 for local errors)."""

    default_code: ClassVar[int] = ResponseCode.SYSTEM_ERROR

    def __init__(self, message: str, *, response_code: int | None = None, retriable: bool | None = None):
        code = self.default_code if response_code is None else int(response_code)
        known = code in ResponseCode._value2member_map_
        super().__init__(message, code=ResponseCode(code) if known else ResponseCode.SYSTEM_ERROR)
        self.response_code = code
        if retriable is not None:
            self.retriable = retriable


class ClientStateError(ClientError):
    """The API was misused: not started, already closed, wrong arguments for this client."""


class NoRouteError(ClientError):
    """No route (or no usable queue) for a topic, even after asking the name server."""

    default_code = ResponseCode.TOPIC_NOT_EXIST


class RemotingError(ClientError):
    """Transport-level failure; the broker may or may not have processed the request."""

    retriable = True


class RemotingTimeoutError(RemotingError):
    """No response within the request timeout."""


class RemotingConnectError(RemotingError):
    """Could not connect, or the connection closed before the response arrived."""


class BrokerError(ClientError):
    """The broker (or name server) answered with a non-success code (`MQBrokerException`)."""

    _registry: ClassVar[dict[int, type[BrokerError]]] = {}

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "default_code" in cls.__dict__:
            BrokerError._registry[int(cls.default_code)] = cls


class BrokerSystemError(BrokerError):
    """SYSTEM_ERROR (1): RocketMQ's catch-all (handler exception, message not found, illegal topic)."""

    default_code = ResponseCode.SYSTEM_ERROR
    retriable = True


class SystemBusyError(BrokerError):
    default_code = ResponseCode.SYSTEM_BUSY
    retriable = True


class FlowControlError(BrokerError):
    default_code = ResponseCode.FLOW_CONTROL
    retriable = True


class MessageIllegalError(BrokerError):
    default_code = ResponseCode.MESSAGE_ILLEGAL


class ServiceNotAvailableError(BrokerError):
    default_code = ResponseCode.SERVICE_NOT_AVAILABLE
    retriable = True


class NoPermissionError(BrokerError):
    default_code = ResponseCode.NO_PERMISSION
    retriable = True


class TopicNotExistError(BrokerError):
    default_code = ResponseCode.TOPIC_NOT_EXIST
    retriable = True


class QueryNotFoundError(BrokerError):
    default_code = ResponseCode.QUERY_NOT_FOUND


class SubscriptionNotExistError(BrokerError):
    default_code = ResponseCode.SUBSCRIPTION_NOT_EXIST


class SubscriptionGroupNotExistError(BrokerError):
    default_code = ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST


class SubscriptionParseError(BrokerError):
    """SUBSCRIPTION_PARSE_FAILED (23): an expression that does not parse, refused by the broker
    or, for SQL92, already by `MessageSelector.by_sql`; the message names the error."""

    default_code = ResponseCode.SUBSCRIPTION_PARSE_FAILED


class _NoBuyerIdError(BrokerError):
    default_code = ResponseCode.NO_BUYER_ID
    retriable = True


class _NotInCurrentUnitError(BrokerError):
    default_code = ResponseCode.NOT_IN_CURRENT_UNIT
    retriable = True


def for_code(code: int, remark: str | None = None) -> BrokerError:
    """The error for a response `code` (unknown codes give a plain, non-retriable `BrokerError`)."""
    cls = BrokerError._registry.get(int(code), BrokerError)
    try:
        name = ResponseCode(code).name
    except ValueError:
        name = f"CODE_{code}"
    text = f"{name} ({code}): {remark}" if remark else f"{name} ({code})"
    if cls is BrokerError:
        return BrokerError(text, response_code=code, retriable=False)
    return cls(text, response_code=code)


def parse_answer(parse: Callable[[RemotingCommand], T], response: RemotingCommand) -> T:
    """`parse(response)` (a `protocol.requests` parser), a refusal raised as `for_code`'s error."""
    try:
        return parse(response)
    except ResponseError as exc:
        raise for_code(exc.response_code, exc.response_remark) from None


def transport_reason(exc: BaseException) -> str:
    """`connection refused`, `connection reset by peer`: the errno's words without `[Errno 111]`."""
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    return str(exc) or type(exc).__name__
