"""Stubs of the compiled send path (`_send.pyx`); the references are
`protocol.message.send_properties` and `protocol.batch.send_batch_messages`."""

from rocketlite.protocol.message import HostAddress, SendProperties
from rocketlite.protocol.record import MessageInner

def send_properties(text: str, cluster: str) -> SendProperties: ...
def send_batch_messages(
    body: bytes | bytearray | memoryview,
    header_properties: str,
    cluster: str,
    topic: str,
    born_host: HostAddress,
    store_host: HostAddress,
    queue_id: int,
    sys_flag: int,
    born_timestamp: int,
    reconsume_times: int,
) -> tuple[list[MessageInner], bool]: ...
