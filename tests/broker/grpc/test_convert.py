"""`convert.message_of`, the one builder of a 5.x `Message` from a stored record (a delivery and a
transaction check alike), against what RocketMQ 5's proxy builds (`GrpcConverter.buildMessage`):
born host without its port, user properties = all but `MessageConst.STRING_HASH_SET`, the type from
the properties, a delivery's receipt."""

from __future__ import annotations

import hashlib

import pytest

from rocketlite.protocol.formats.record import MessageInner, StoredRecord, decode_record, encode_record
from rocketlite.protocol.message import HostAddress, MessageSysFlag, properties_to_string
from rocketlite.protocol.proto import available

pytestmark = pytest.mark.skipif(available() is not None, reason=f"{available()}")

if available() is None:
    from rocketlite.broker.grpc.convert import Receipt, message_of
    from rocketlite.broker.grpc.kit import ProtoKit
    from rocketlite.protocol.proto.v2 import definition_pb2 as pb


def record(props: dict[str, str], *, sys_flag: int = 0, reconsume_times: int = 0) -> StoredRecord:
    """A record as the store holds it (encoded, then decoded back)."""
    return decode_record(
        encode_record(
            MessageInner(
                topic="ConvT", body=b"payload", born_host=HostAddress.parse("10.0.0.5:51234"),
                store_host=HostAddress.parse("10.0.0.1:10911"), queue_id=2, sys_flag=sys_flag,
                born_timestamp=1_700_000_000_123, reconsume_times=reconsume_times,
                properties_string=properties_to_string(props), store_timestamp=1_700_000_000_456,
                queue_offset=7, commit_log_offset=4096,
            )
        )
    )  # fmt: skip


def test_a_delivered_fifo_message() -> None:
    props = {
        "UNIQ_KEY": "ID-1", "TAGS": "TagA", "KEYS": "k1 k2", "__SHARDINGKEY": "g-1", "color": "red",
        "TRACE_CONTEXT": "tc", "PGROUP": "ConvT", "CLUSTER": "DefaultCluster", "WAIT": "true",
    }  # fmt: skip
    message = message_of(ProtoKit(), record(props, reconsume_times=2), Receipt("h a n d l e", 30_000))
    system = message.system_properties
    assert (message.topic.name, message.body) == ("ConvT", b"payload")
    assert (system.message_id, system.tag, list(system.keys)) == ("ID-1", "TagA", ["k1", "k2"])
    assert system.message_type == pb.MessageType.FIFO and system.message_group == "g-1"
    assert system.born_host == "10.0.0.5"  # no port: Java's getBornHostString
    assert system.store_host == "10.0.0.1:10911"
    assert (system.queue_id, system.queue_offset, system.delivery_attempt) == (2, 7, 3)
    assert system.born_timestamp.ToMilliseconds() == 1_700_000_000_123
    assert system.store_timestamp.ToMilliseconds() == 1_700_000_000_456
    assert system.body_digest.type == pb.DigestType.MD5
    assert system.body_digest.checksum == hashlib.md5(b"payload").hexdigest().upper()
    assert system.body_encoding == pb.Encoding.IDENTITY
    assert system.trace_context == "tc"
    assert (system.receipt_handle, system.invisible_duration.ToMilliseconds()) == ("h a n d l e", 30_000)
    # what RocketMQ's STRING_HASH_SET leaves out of it shows among the user properties
    assert dict(message.user_properties) == {"color": "red", "__SHARDINGKEY": "g-1", "TRACE_CONTEXT": "tc"}


def test_a_transaction_check_and_a_delayed_message() -> None:
    half = {"UNIQ_KEY": "TX-1", "TRAN_MSG": "true", "PGROUP": "ConvT", "REAL_TOPIC": "ConvT",
            "REAL_QID": "2", "TRANSACTION_CHECK_TIMES": "1", "__transactionId__": "TX-1"}  # fmt: skip
    check = message_of(ProtoKit(), record(half, sys_flag=MessageSysFlag.COMPRESSED_FLAG))
    system = check.system_properties
    assert system.message_type == pb.MessageType.TRANSACTION
    assert system.body_encoding == pb.Encoding.GZIP  # a compressed body says so
    assert not system.receipt_handle and not system.HasField("invisible_duration")  # no delivery
    assert dict(check.user_properties) == {"TRANSACTION_CHECK_TIMES": "1", "__transactionId__": "TX-1"}

    delayed = message_of(ProtoKit(), record({"UNIQ_KEY": "D-1", "TIMER_DELIVER_MS": "1700000009000"}))
    assert delayed.system_properties.message_type == pb.MessageType.DELAY
    assert delayed.system_properties.delivery_timestamp.ToMilliseconds() == 1_700_000_009_000
    assert dict(delayed.user_properties) == {}

    no_uniq = message_of(ProtoKit(), record({"__BORNHOST": "192.168.1.9"}))
    assert no_uniq.system_properties.message_id == "0A00000100002A9F0000000000001000"  # the offset id
    assert no_uniq.system_properties.born_host == "192.168.1.9"  # the producer's own, when it says
    assert no_uniq.system_properties.message_type == pb.MessageType.NORMAL
