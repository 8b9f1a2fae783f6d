"""`AsyncTransactionProducer`: half message, local transaction, END_TRANSACTION (`TransactionMQProducer`).

1. The message goes out as a half message (property `TRAN_MSG=true`, `PGROUP`, sysFlag PREPARED);
   the broker stores it where no consumer sees it.
2. On SEND_OK the listener's `execute_local_transaction(msg, arg)` runs and returns COMMIT_MESSAGE,
   ROLLBACK_MESSAGE or UNKNOW (an exception counts as UNKNOW, with its text as the remark).
3. END_TRANSACTION (one-way) tells the broker to commit (8), roll back (12) or wait (0); it needs
   the half message's commit-log offset (decoded from the offsetMsgId) and queue offset.
4. For half messages left unknown the broker later sends CHECK_TRANSACTION_STATE; the listener's
   `check_local_transaction(msg)` answers, and END_TRANSACTION with `fromTransactionCheck=true` goes
   back on the connection the check came in on.

Listener methods may be plain functions (run in a small thread pool, so they may block) or
coroutines (awaited on the loop).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from rocketlite.client.errors import ClientError
from rocketlite.client.message import Message, MessageExt, SendResult, SendStatus, message_from_record
from rocketlite.client.producer import AsyncProducer
from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.formats.speedups import decode_records
from rocketlite.protocol.message import MessageConst, MessageSysFlag, parse_msg_id
from rocketlite.protocol.wire.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader
from rocketlite.remoting.connection import Connection

log = logging.getLogger("rocketlite.client.transaction")

__all__ = [
    "AsyncTransactionProducer",
    "LocalTransactionState",
    "TransactionListener",
    "TransactionSendResult",
]


class LocalTransactionState(enum.Enum):
    """Java's names, UNKNOW included (no UNKNOWN alias: type checkers treat aliases as distinct)."""

    COMMIT_MESSAGE = "COMMIT_MESSAGE"
    ROLLBACK_MESSAGE = "ROLLBACK_MESSAGE"
    UNKNOW = "UNKNOW"

    @property
    def wire_type(self) -> int:
        """`commitOrRollback` of END_TRANSACTION."""
        if self is LocalTransactionState.COMMIT_MESSAGE:
            return MessageSysFlag.TRANSACTION_COMMIT_TYPE
        if self is LocalTransactionState.ROLLBACK_MESSAGE:
            return MessageSysFlag.TRANSACTION_ROLLBACK_TYPE
        return MessageSysFlag.TRANSACTION_NOT_TYPE


StateResult = LocalTransactionState | Awaitable[LocalTransactionState | None] | None


class TransactionListener(Protocol):
    def execute_local_transaction(self, msg: Message, arg: Any) -> StateResult: ...

    def check_local_transaction(self, msg: MessageExt) -> StateResult: ...


@dataclass(frozen=True, slots=True)
class TransactionSendResult(SendResult):
    local_transaction_state: LocalTransactionState = LocalTransactionState.UNKNOW


class AsyncTransactionProducer(AsyncProducer):
    """A producer that sends transactional messages and answers the broker's checks."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str | None = None,
        *,
        listener: TransactionListener,
        check_threads: int = 1,
        **kwargs: Any,
    ) -> None:
        super().__init__(group, namesrv_addr, **kwargs)
        self.listener = listener
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=max(1, check_threads), thread_name_prefix=f"rocketlite-tx-{group}"
        )
        self._checks: set[asyncio.Task[None]] = set()

    async def close(self) -> None:
        if self._checks:
            await asyncio.gather(*self._checks, return_exceptions=True)
        await super().close()
        self._executor.shutdown(wait=False)

    async def _call(self, fn: Callable[..., StateResult], *args: Any) -> LocalTransactionState:
        if inspect.iscoroutinefunction(fn):
            result = await fn(*args)
        else:
            result = await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)
            if inspect.isawaitable(result):
                result = await result
        return result if isinstance(result, LocalTransactionState) else LocalTransactionState.UNKNOW

    async def send_message_in_transaction(
        self, msg: Message, arg: Any = None, *, timeout: float | None = None
    ) -> TransactionSendResult:
        """Send a half message, run the local transaction, and end it; see the module docstring."""
        msg.delay_level = 0  # transactional messages cannot be delayed (Java clears it too)
        msg.properties[MessageConst.TRANSACTION_PREPARED] = "true"
        msg.properties[MessageConst.PRODUCER_GROUP] = self.group
        result = await self.send(msg, timeout=timeout)
        state = LocalTransactionState.UNKNOW
        error: str | None = None
        if result.status is SendStatus.SEND_OK:
            msg.properties[MessageConst.TRANSACTION_ID] = result.msg_id
            try:
                state = await self._call(self.listener.execute_local_transaction, msg, arg)
            except Exception as exc:
                log.exception("local transaction of %s failed", result.msg_id)
                error = f"executeLocalTransactionBranch exception: {exc}"
        else:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        try:
            await self.end_transaction(result, state, error)
        except ClientError as exc:
            log.warning("ending transaction %s (%s) failed: %s", result.msg_id, state.name, exc)
        return TransactionSendResult(
            status=result.status,
            msg_id=result.msg_id,
            offset_msg_id=result.offset_msg_id,
            queue=result.queue,
            queue_offset=result.queue_offset,
            transaction_id=result.transaction_id or result.msg_id,
            region_id=result.region_id,
            trace_on=result.trace_on,
            local_transaction_state=state,
        )

    async def end_transaction(
        self, result: SendResult, state: LocalTransactionState, remark: str | None = None
    ) -> None:
        """END_TRANSACTION (one-way) to the master that holds the half message."""
        instance = self.instance
        addr = await instance.require_master(result.queue.broker_name, result.queue.topic)
        header = EndTransactionRequestHeader(
            producer_group=self.group,
            tran_state_table_offset=result.queue_offset,
            commit_log_offset=parse_msg_id(result.offset_msg_id).offset,
            commit_or_rollback=state.wire_type,
            from_transaction_check=False,
            msg_id=result.msg_id,
            transaction_id=result.transaction_id or result.msg_id,
            bname=result.queue.broker_name,
        )
        cmd = instance.command(RequestCode.END_TRANSACTION, header.to_ext(), remark=remark)
        await instance.invoke_oneway(addr, cmd)

    # -- broker checks ---------------------------------------------------------------------
    def on_check_transaction(
        self, conn: Connection, header: CheckTransactionStateRequestHeader, body: bytes
    ) -> None:
        task = asyncio.get_running_loop().create_task(self._check(conn, header, body))
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)

    async def _check(self, conn: Connection, header: CheckTransactionStateRequestHeader, body: bytes) -> None:
        records = decode_records(body)
        if not records:
            log.warning("transaction check without a message body ignored")
            return
        msg = message_from_record(records[0])
        uniq = msg.properties.get(MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.offset_msg_id
        transaction_id = header.transaction_id or uniq
        msg.properties[MessageConst.TRANSACTION_ID] = transaction_id
        remark: str | None = None
        try:
            state = await self._call(self.listener.check_local_transaction, msg)
        except Exception as exc:
            log.exception("transaction check of %s failed", uniq)
            state, remark = LocalTransactionState.UNKNOW, f"checkLocalTransactionState exception: {exc}"
        end = EndTransactionRequestHeader(
            producer_group=self.group,
            tran_state_table_offset=header.tran_state_table_offset,
            commit_log_offset=header.commit_log_offset,
            commit_or_rollback=state.wire_type,
            from_transaction_check=True,
            msg_id=uniq,
            transaction_id=transaction_id,
        )
        log.info("transaction check of %s answered %s", uniq, state.name)
        conn.oneway(self.instance.command(RequestCode.END_TRANSACTION, end.to_ext(), remark=remark))
