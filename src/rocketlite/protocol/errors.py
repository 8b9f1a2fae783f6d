"""One exception root for rocketlite; subclasses carry the RocketMQ response code they map to.

The broker turns any `RocketliteError` into a response with `code` and the message as remark, so
raising the right subclass anywhere is enough to give a client RocketMQ's answer.
"""

from __future__ import annotations

from rocketlite.protocol.codes import ResponseCode


class RocketliteError(Exception):
    """Root of every error rocketlite raises on purpose."""

    code: ResponseCode = ResponseCode.SYSTEM_ERROR
    retriable: bool = False

    def __init__(self, message: str, *, code: ResponseCode | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code

    @property
    def remark(self) -> str:
        return str(self)


class ConfigError(RocketliteError):
    """A configuration file or value is invalid; raised at the edge, before anything starts."""


class StoreError(RocketliteError):
    """The message store cannot do what was asked."""


class CorruptRecordError(StoreError):
    """A commit-log record fails its magic, size or CRC check; carries the offset where it starts."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(f"{message} at commit-log offset {offset}")
        self.offset = offset


class SegmentCreateError(StoreError):
    """A new log segment could not be created (disk full, permissions): nothing was written, and
    the next put tries again, so writes resume by themselves once space returns."""

    retriable = True


class MessageIllegalError(RocketliteError):
    """Message too large, properties too long, topic name illegal."""

    code = ResponseCode.MESSAGE_ILLEGAL


class ServiceNotAvailableError(RocketliteError):
    """Store not writable (shut down, disk full, slave)."""

    code = ResponseCode.SERVICE_NOT_AVAILABLE
    retriable = True


class ProtocolError(RocketliteError):
    """A peer sent bytes that do not follow the remoting protocol."""
