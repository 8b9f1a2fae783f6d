"""Raw POP requests for tests, over a `RemotingClient` on 127.0.0.1: POP_MESSAGE with RocketMQ's
header, the receipt handles a client builds from the answer, ACK_MESSAGE."""

from __future__ import annotations

from rocketlite.protocol.formats.record import StoredRecord, decode_records
from rocketlite.protocol.wire.command import RemotingCommand, make_request
from rocketlite.protocol.wire.pop import PopRequestCode, ReceiptHandle, parse_offset_info
from rocketlite.remoting.client import RemotingClient


async def pop(client: RemotingClient, addr: str, group: str, topic: str, *, invisible_ms: int = 60_000,
              queue_id: int = -1, poll_ms: int = 0, max_nums: int = 32, order: bool = False,
              timeout: float = 25.0) -> RemotingCommand:  # fmt: skip
    ext = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), "maxMsgNums": str(max_nums),
           "invisibleTime": str(invisible_ms), "pollTime": str(poll_ms), "bornTime": "1", "initMode": "1",
           "expType": "TAG", "exp": "*", "order": "true" if order else "false"}  # fmt: skip
    return await client.invoke(addr, make_request(PopRequestCode.POP_MESSAGE, ext), timeout)


def handles(response: RemotingCommand, broker_name: str) -> list[tuple[StoredRecord, str]]:
    """What a client does with a POP answer: one receipt handle per record."""
    ext = response.ext_fields or {}
    starts = parse_offset_info(ext["startOffsetInfo"])
    records = decode_records(response.body or b"")
    return [
        (r, ReceiptHandle(starts[("0", r.queue_id)][0], int(ext["popTime"]), int(ext["invisibleTime"]),
                          int(ext["reviveQid"]), "0", broker_name, r.queue_id, r.queue_offset).build())
        for r in records
    ]  # fmt: skip


async def ack(client: RemotingClient, addr: str, group: str, record: StoredRecord, handle: str,
              timeout: float = 10.0) -> RemotingCommand:  # fmt: skip
    ext = {"consumerGroup": group, "topic": record.topic, "queueId": str(record.queue_id),
           "extraInfo": handle, "offset": str(record.queue_offset)}  # fmt: skip
    return await client.invoke(addr, make_request(PopRequestCode.ACK_MESSAGE, ext), timeout)
