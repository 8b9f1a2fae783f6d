"""`rocketmq_rpc_latency`: how long the broker took over each remoting request (RocketMQ 5's
`RemotingMetricsManager`, recorded in `NettyRemotingAbstract.writeResponse`).

The broker's request table reports every answered request here (`RequestTable.observer`); the
histogram is kept per (request code, response code, is_long_polling, result), the codes named as
RocketMQ labels them: the `RequestCode` / `ResponseCode` field name lower-cased
(`send_message_v2`, `success`), the number for a code without a name. Buckets in milliseconds:
1, 3, 5, 7, 10, 100, 1000, 2000, 3000 (the view RocketMQ registers).

`is_long_polling` is "true" for a pull answered after it was held (`request.isSuspended()` in
Java: the time counts the hold). `result` takes RocketMQ's `RemotingMetricsConstant` values:
`success` (answer written), `oneway` (a one-way request whose handler made an answer, not sent),
`write_channel_failed` (the connection was closed when the answer was due), `cancelled`. Java's
fifth value, `process_request_failed`, is for a request its thread pool refused; the event loop
has no such pool, so it never occurs here. A one-way request with no answer is not recorded (Java
records nothing for a null response either).
"""

from __future__ import annotations

from typing import Final

from rocketlite.broker.histogram import Histogram
from rocketlite.protocol.codes import RequestCode, ResponseCode

RPC_LATENCY_BUCKETS_MS: Final = (1.0, 3.0, 5.0, 7.0, 10.0, 100.0, 1000.0, 2000.0, 3000.0)


def request_code_desc(code: int) -> str:
    try:
        return RequestCode(code).name.lower()
    except ValueError:
        return str(code)


def response_code_desc(code: int) -> str:
    try:
        return ResponseCode(code).name.lower()
    except ValueError:
        return str(code)


class RpcLatency:
    """Per (request code, response code, long polling, result) latency histograms, fed by
    `observe` (a `RequestObserver`)."""

    def __init__(self) -> None:
        self.histograms: dict[tuple[int, int, bool, str], Histogram] = {}  # in milliseconds

    def observe(
        self, request_code: int, response_code: int | None, elapsed_ms: float, long_polling: bool, result: str
    ) -> None:
        if response_code is None:
            return
        key = (request_code, response_code, long_polling, result)
        hist = self.histograms.get(key)
        if hist is None:
            hist = self.histograms[key] = Histogram(RPC_LATENCY_BUCKETS_MS)
        hist.observe(elapsed_ms)
