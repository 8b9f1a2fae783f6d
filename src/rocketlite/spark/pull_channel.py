"""PULL_MESSAGE answers received straight into the batch a reader decodes, over a blocking socket.

A `rocketmq` read task moves its whole range through one queue's pulls: hundreds of answers of
up to a few MiB each, whose bodies (records back to back) `records.decode_batch` turns into
Arrow columns. Over the SDK's asyncio connection each body was copied four times before the
decode (the stream decoder's buffer, the frame taken as bytes, the body sliced out, the pulls of
a batch joined), and each answer crossed from the client's loop thread to the task's thread. A
task pulls one queue in order, one answer at a time, so it needs none of that: this channel
reads each answer's length and header, then `recv_into`s the body at the end of the bytes the
task is gathering for its next Arrow batch. The body is copied once, by the kernel.

The next pull goes out as soon as an answer's header says where the data continues, before its
body is read: the broker reads the next records while this task receives and decodes.

Frames are RocketMQ's (`protocol.frame`): a 4-byte big-endian length, the header word (serialize
type in the high byte, header length in the low three), the header, the body. Requests are
signed by the SDK's client instance when it has ACL keys, as every other request.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from dataclasses import dataclass
from typing import Final

import numpy as np

from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.wire.command import RemotingCommand
from rocketlite.protocol.wire.frame import (
    HEADER_LENGTH_MASK,
    HEADER_WORD,
    LENGTH,
    SERIALIZE_TYPE_SHIFT,
    encode_command,
)
from rocketlite.protocol.wire.frame_codec import check_prefix
from rocketlite.protocol.wire.header_codec import decode_header

__all__ = ["Answer", "BatchBuffer", "PullChannel", "PullChannelError", "channel_for", "close_channels"]

_RESPONSE: Final = 1  # the flag bit of an answer
_MAX_FRAME: Final = 64 * 1024 * 1024


class PullChannelError(ConnectionError):
    """The broker closed the connection, sent a malformed frame, or did not answer in time."""


class BatchBuffer:
    """Bytes gathered for one Arrow batch: pull bodies back to back.

    A fresh buffer per batch, never reused: the decode copies every column out, but a fresh
    buffer keeps that a non-issue for any decoder. It is a numpy array because `np.empty` does not
    write the memory first (a `bytearray` of 8 MiB is zero-filled, which costs as much as the
    decode); the kernel writes each page once, when `recv_into` fills it.
    """

    def __init__(self, capacity: int) -> None:
        self._data = np.empty(capacity, dtype=np.uint8)
        self.used = 0

    def reserve(self, n: int) -> memoryview:
        """A writable view of the next `n` bytes, growing the buffer when they do not fit."""
        end = self.used + n
        if end > len(self._data):
            grown = np.empty(max(end, 2 * len(self._data)), dtype=np.uint8)
            grown[: self.used] = self._data[: self.used]
            self._data = grown
        return self._data[self.used : end].data

    def view(self) -> memoryview:
        """The bytes gathered so far."""
        return self._data[: self.used].data


@dataclass(slots=True)
class Answer:
    """An answer's header; its body (`body_len` bytes) is still on the wire."""

    command: RemotingCommand
    body_len: int


class PullChannel:
    """One blocking connection to one broker, used by one task at a time (see the module docstring)."""

    def __init__(self, addr: str, timeout: float) -> None:
        host, _, port = addr.rpartition(":")
        self.addr = addr
        try:
            self.sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
        except OSError as exc:
            raise PullChannelError(f"connecting to broker {addr} failed: {exc}") from exc
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._opaque = 0
        self._sent: list[int] = []  # opaques of requests whose answers are still to be read
        self.closed = False

    def send(self, cmd: RemotingCommand) -> None:
        self._opaque = (self._opaque + 1) & 0x7FFFFFFF
        cmd.opaque = self._opaque
        try:
            self.sock.sendall(encode_command(cmd))
        except OSError as exc:
            self.close()
            raise PullChannelError(f"sending to broker {self.addr} failed: {exc}") from exc
        self._sent.append(cmd.opaque)

    def read_header(self) -> Answer:
        """The next answer's header, in the order the requests were sent."""
        head = self._exactly(LENGTH.size + HEADER_WORD.size)
        try:
            length = check_prefix(head, 0, _MAX_FRAME)
        except ProtocolError as exc:
            self.close()
            raise PullChannelError(f"broker {self.addr}: {exc}") from exc
        (word,) = HEADER_WORD.unpack_from(head, LENGTH.size)
        header_length = word & HEADER_LENGTH_MASK
        body_len = length - HEADER_WORD.size - header_length
        if body_len < 0:
            self.close()
            raise PullChannelError(f"broker {self.addr}: header length {header_length} exceeds its frame")
        try:
            command = decode_header(memoryview(self._exactly(header_length)), word >> SERIALIZE_TYPE_SHIFT)
        except ProtocolError as exc:
            self.close()
            raise PullChannelError(f"broker {self.addr}: {exc}") from exc
        expected = self._sent.pop(0) if self._sent else None
        if not command.flag & _RESPONSE or command.opaque != expected:
            self.close()
            raise PullChannelError(
                f"broker {self.addr} sent frame {command.opaque} where the answer to {expected} was due"
            )
        return Answer(command, body_len)

    def read_body(self, answer: Answer, into: BatchBuffer | None) -> bytes:
        """The answer's body: appended to `into` (returns b""), or returned when `into` is None."""
        if into is None:
            return bytes(self._exactly(answer.body_len))
        self._fill(into.reserve(answer.body_len))
        into.used += answer.body_len
        return b""

    def _exactly(self, n: int) -> bytearray:
        out = bytearray(n)
        self._fill(memoryview(out))
        return out

    def _fill(self, view: memoryview) -> None:
        got = 0
        try:
            while got < len(view):
                k = self.sock.recv_into(view[got:])
                if k == 0:
                    raise PullChannelError(f"broker {self.addr} closed the connection")
                got += k
        except PullChannelError:
            self.close()
            raise
        except OSError as exc:  # a timeout included
            self.close()
            raise PullChannelError(f"reading from broker {self.addr} failed: {exc}") from exc

    @property
    def idle(self) -> bool:
        """No answer is owed (a task that stopped early leaves its channel unusable: closed)."""
        return not self._sent and not self.closed

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError):
            self.sock.close()


_channels: dict[str, PullChannel] = {}
_channels_lock = threading.Lock()


def channel_for(addr: str, timeout: float) -> PullChannel:
    """An idle channel to `addr`, kept across the tasks a reused worker runs (taken while in use,
    so two readers in one process never share one)."""
    with _channels_lock:
        channel = _channels.pop(addr, None)
    if channel is None or not channel.idle:
        if channel is not None:
            channel.close()
        channel = PullChannel(addr, timeout)
    channel.sock.settimeout(timeout)
    return channel


def release(channel: PullChannel) -> None:
    """Give an idle channel back for the next task; close any other."""
    if not channel.idle:
        channel.close()
        return
    with _channels_lock:
        old = _channels.pop(channel.addr, None)
        _channels[channel.addr] = channel
    if old is not None:
        old.close()


def close_channels() -> None:
    with _channels_lock:
        channels = list(_channels.values())
        _channels.clear()
    for channel in channels:
        channel.close()
