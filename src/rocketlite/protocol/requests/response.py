"""`ResponseError` and `expect`: how a parser refuses an answer its request cannot have."""

from __future__ import annotations

from collections.abc import Collection

from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.errors import RocketliteError
from rocketlite.protocol.wire.command import RemotingCommand

SUCCESS_ONLY: tuple[int, ...] = (ResponseCode.SUCCESS,)


def code_name(code: int) -> str:
    """`SYSTEM_ERROR` for 1, `CODE_999` for a code this enum does not know."""
    try:
        return ResponseCode(code).name
    except ValueError:
        return f"CODE_{code}"


class ResponseError(RocketliteError):
    """A server answered `request_code` with `response_code`, which that request does not expect.

    `response_code` is the wire int (servers may send codes `ResponseCode` does not know);
    `response_remark` the server's remark. Callers map these to their own errors."""

    def __init__(self, request_code: int, response_code: int, response_remark: str | None) -> None:
        try:
            what = RequestCode(request_code).name
        except ValueError:
            what = f"request {request_code}"
        text = f"{what}: {code_name(response_code)} ({response_code})"
        known = response_code in ResponseCode._value2member_map_
        super().__init__(
            f"{text}: {response_remark}" if response_remark else text,
            code=ResponseCode(response_code) if known else ResponseCode.SYSTEM_ERROR,
        )
        self.request_code = request_code
        self.response_code = response_code
        self.response_remark = response_remark


def expect(response: RemotingCommand, request_code: int, ok: Collection[int] = SUCCESS_ONLY) -> int:
    """`response.code` when it is in `ok`; otherwise raise `ResponseError`."""
    if response.code not in ok:
        raise ResponseError(request_code, response.code, response.remark)
    return response.code
