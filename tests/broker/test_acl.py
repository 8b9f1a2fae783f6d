"""Plain ACL (broker/acl.py): signatures, plain_acl.yml, the broker's checks, real clients with keys."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from rocketlite.broker.acl import (
    DENY,
    PUB,
    SUB,
    AclValidator,
    AddressMatcher,
    check_permission,
    default_acl_path,
    needed_resources,
    parse_acl_config,
    parse_perm,
    remote_ip,
)
from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.controller import BrokerController
from rocketlite.embedded import EmbeddedCluster, embedded
from rocketlite.protocol.bodies.heartbeat import ConsumerData, HeartbeatData, SubscriptionData
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.errors import ConfigError
from rocketlite.protocol.wire.acl_signature import calc_signature, sign, signing_content
from rocketlite.protocol.wire.command import RemotingCommand, make_request
from rocketlite.protocol.wire.headers import SendMessageRequestHeader
from rocketlite.protocol.wire.pop import PopRequestCode
from rocketlite.store.config import StoreConfig
from tests.support.aio import run
from tests.support.broker_harness import BrokerUnderTest, broker_under_test
from tests.support.foreign_clients.real import Clients, msg_spec
from tests.support.names import unique
from tests.support.topics import create_topic

ACL_YML = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
      - topicD=PUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    admin: true
"""

USER = ("RocketMQ", "12345678")
ADMIN = ("rocketmq2", "12345678")


# -- signature --------------------------------------------------------------------------------------
def test_signature_worked_example() -> None:
    ext = {"topic": "TopicTest", "AccessKey": "rocketmq2"}
    assert signing_content(ext, None) == b"rocketmq2TopicTest"
    assert calc_signature(signing_content(ext, None), "12345678") == "GeeGoP9mRvDhoVp4PD5omX0prgE="
    assert sign({"topic": "TopicTest"}, None, "rocketmq2", "12345678")["Signature"] == (
        "GeeGoP9mRvDhoVp4PD5omX0prgE="
    )


def test_signature_captured_from_real_clients() -> None:
    # ali-ons with accessKeyId=myAK accessKeySecret=mySK (real-clients.md §4).
    ons = {"AccessKey": "myAK", "OnsChannel": "ALIYUN", "topic": "SmokeTopic"}
    assert calc_signature(signing_content(ons, None), "mySK") == "MJx6qG1++YoTY7TdcmTGLiDfHa0="
    # rocketmq==0.4.4 (C++) without credentials: empty AccessKey, empty HMAC key.
    cpp = {"AccessKey": "", "OnsChannel": "ALIYUN", "topic": "%RETRY%smoke_cpp_consumer_group"}
    assert calc_signature(signing_content(cpp, None), "") == "m9B4yy+G9Sevb1vG0hT43lVVlTw="


def test_signature_order_body_and_excluded_keys() -> None:
    # Java String order: uppercase before lowercase; Signature itself is never part of the content.
    ext = {"b": "2", "B": "1", "a": "3", "Signature": "zzz"}
    assert signing_content(ext, b"BODY") == b"13" + b"2" + b"BODY"
    assert signing_content({"x": "1", "_UNIQUE_KEY_QUERY": "true"}, None,
                           exclude=("Signature", "_UNIQUE_KEY_QUERY")) == b"1"  # fmt: skip


# -- permissions, addresses, config ----------------------------------------------------------------------
def test_perm_semantics() -> None:
    assert parse_perm("PUB|SUB") == parse_perm("SUB|PUB") == PUB | SUB
    assert parse_perm("DENY") == parse_perm("bogus") == parse_perm(None) == DENY
    assert check_permission(PUB, PUB) and check_permission(SUB, PUB | SUB)
    assert not check_permission(SUB, PUB) and not check_permission(PUB, SUB)
    assert not check_permission(PUB, DENY) and not check_permission(PUB, DENY | PUB)


def test_address_matcher() -> None:
    assert AddressMatcher("*").match("1.2.3.4")
    assert AddressMatcher("192.168.0.*").match("192.168.0.7")
    assert not AddressMatcher("192.168.0.*").match("192.168.1.7")
    assert AddressMatcher("192.168.*").match("192.168.9.9")
    assert AddressMatcher("10.0.0.1-10").match("10.0.0.10")
    assert not AddressMatcher("10.0.0.1-10").match("10.0.0.11")
    assert AddressMatcher("10.0.0.{1,5}").match("10.0.0.5")
    assert not AddressMatcher("10.0.0.{1,5}").match("10.0.0.2")
    assert AddressMatcher("127.0.0.1").match("127.0.0.1")
    assert AddressMatcher("::1").match("::1")
    assert not AddressMatcher(None).match("127.0.0.1")
    assert not AddressMatcher("").match("127.0.0.1")
    assert remote_ip("127.0.0.1:5555") == "127.0.0.1"
    assert remote_ip("[::1]:5555") == "::1"


def test_config_parsing_and_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = parse_acl_config(yaml.safe_load(ACL_YML))
    user = cfg.accounts["RocketMQ"]
    assert user.secret_key == "12345678" and not user.admin
    assert user.resource_perms == {
        "topicA": DENY, "topicB": PUB | SUB, "topicC": SUB, "topicD": PUB,
        "%RETRY%groupA": DENY, "%RETRY%groupB": PUB | SUB,
    }  # fmt: skip
    assert user.default_topic_perm == DENY and user.default_group_perm == SUB
    assert cfg.accounts["rocketmq2"].admin and cfg.accounts["rocketmq2"].resource_perms is None
    with pytest.raises(ConfigError, match="not data"):
        parse_acl_config(None)
    with pytest.raises(ConfigError, match="longer than 6"):
        parse_acl_config({"accounts": [{"accessKey": "ak", "secretKey": "12345678"}]})
    with pytest.raises(ConfigError, match="topicPerms"):
        parse_acl_config(
            {"accounts": [{"accessKey": "akakak", "secretKey": "12345678", "topicPerms": ["x"]}]}
        )
    monkeypatch.setenv("ROCKETMQ_HOME", str(tmp_path))
    assert default_acl_path(None) == tmp_path / "conf" / "plain_acl.yml"
    assert default_acl_path("/etc/acl.yml") == Path("/etc/acl.yml")
    # aclEnable without a file: the broker does not start (RocketMQ: "... file is not data").
    with pytest.raises(ConfigError):
        BrokerController(
            BrokerConfig(listen_port=0, acl_enable=True), StoreConfig(store_path_root_dir=tmp_path)
        )


def test_needed_resources() -> None:
    v2 = make_request(RequestCode.SEND_MESSAGE_V2, {"a": "pg", "b": "T"})
    assert needed_resources(v2) == {"T": PUB}
    retry = make_request(RequestCode.SEND_MESSAGE_V2, {"a": "cg", "b": "%RETRY%cg"})
    assert needed_resources(retry) == {"%RETRY%cg": SUB}
    pull = make_request(RequestCode.PULL_MESSAGE, {"consumerGroup": "cg", "topic": "T"})
    assert needed_resources(pull) == {"T": SUB, "%RETRY%cg": SUB}
    for code in PopRequestCode:  # POP, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME: read rights, as a pull
        pop = make_request(code, {"consumerGroup": "cg", "topic": "T"})
        assert needed_resources(pop) == {"T": SUB, "%RETRY%cg": SUB}
    back = make_request(RequestCode.CONSUMER_SEND_MSG_BACK, {"group": "cg", "originTopic": "T"})
    assert needed_resources(back) == {"T": PUB, "%RETRY%cg": SUB}
    hb = HeartbeatData(
        client_id="c1",
        consumer_data_set=(
            ConsumerData(
                group_name="cg", subscription_data_set=(SubscriptionData(topic="T", sub_string="*"),)
            ),
        ),
    )
    assert needed_resources(make_request(RequestCode.HEART_BEAT, {}, hb.to_bytes())) == {
        "%RETRY%cg": SUB,
        "T": SUB,
    }
    offset = make_request(RequestCode.UPDATE_CONSUMER_OFFSET, {"consumerGroup": "cg", "topic": "T"})
    assert needed_resources(offset) == {"%RETRY%cg": SUB, "T": SUB}
    assert needed_resources(make_request(RequestCode.GET_BROKER_RUNTIME_INFO, {})) == {}


# -- the broker over sockets --------------------------------------------------------------------------
def write_acl(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def send_ext(topic: str, group: str = "test_pg") -> dict[str, str]:
    header = SendMessageRequestHeader(
        producer_group=group, topic=topic, default_topic="TBW102", default_topic_queue_nums=4,
        queue_id=0, sys_flag=0, born_timestamp=1, flag=0, properties="", reconsume_times=0,
    )  # fmt: skip
    return header.to_ext_v2()


async def signed(b: BrokerUnderTest, code: int, ext: dict[str, str], body: bytes | None = None,
                 keys: tuple[str, str] | None = USER) -> RemotingCommand:  # fmt: skip
    if keys is not None:
        ext = sign(ext, body, *keys)
    return await b.call(code, ext, body)


def heartbeat(group: str, topic: str) -> bytes:
    sub = SubscriptionData(topic=topic, sub_string="*")
    return HeartbeatData(
        client_id="c1", consumer_data_set=(ConsumerData(group_name=group, subscription_data_set=(sub,)),)
    ).to_bytes()


def denied(resp: RemotingCommand, remark: str) -> bool:
    return resp.code == ResponseCode.NO_PERMISSION and remark in (resp.remark or "")


def test_broker_checks_keys_signatures_and_perms(tmp_path: Path) -> None:
    acl_file = write_acl(tmp_path / "plain_acl.yml", ACL_YML)

    async def scenario() -> None:
        async with broker_under_test(tmp_path / "store", acl_enable=True, acl_config_file=str(acl_file)) as b:
            # Right keys, topic PUB|SUB: stored.
            ok = await signed(b, RequestCode.SEND_MESSAGE_V2, send_ext("topicB"), b"hello")
            assert ok.code == ResponseCode.SUCCESS, ok
            # Missing keys, unknown key, wrong secret, tampered body.
            r = await signed(b, RequestCode.SEND_MESSAGE_V2, send_ext("topicB"), b"x", keys=None)
            assert denied(r, "No accessKey is configured"), r
            r = await signed(
                b, RequestCode.SEND_MESSAGE_V2, send_ext("topicB"), b"x", keys=("nobody", "12345678")
            )
            assert denied(r, "No acl config for nobody"), r
            r = await signed(
                b, RequestCode.SEND_MESSAGE_V2, send_ext("topicB"), b"x", keys=("RocketMQ", "wrong!")
            )
            assert denied(r, "Check signature failed for accessKey=RocketMQ"), r
            ext = sign(send_ext("topicB"), b"original", *USER)
            r = await b.call(RequestCode.SEND_MESSAGE_V2, ext, b"tampered")
            assert denied(r, "Check signature failed"), r
            # Per-topic perms: SUB-only, DENY and unlisted (defaultTopicPerm DENY) topics can't be sent to.
            for topic, why in [("topicC", "No permission for topic:topicC"),
                               ("topicA", "No permission for topic:topicA"),
                               ("topicX", "No default permission for topic:topicX")]:  # fmt: skip
                r = await signed(b, RequestCode.SEND_MESSAGE_V2, send_ext(topic), b"x")
                assert denied(r, why), (topic, r)
            assert (await signed(b, RequestCode.SEND_MESSAGE_V2, send_ext("topicD"), b"x")).code == 0
            # Pull: topic SUB and group SUB (defaultGroupPerm SUB; groupA DENY).
            pull = {"consumerGroup": "groupX", "topic": "topicC", "queueId": "0", "queueOffset": "0",
                    "maxMsgNums": "1", "sysFlag": "0", "commitOffset": "0", "suspendTimeoutMillis": "0",
                    "subscription": "*", "subVersion": "0"}  # fmt: skip
            r = await signed(b, RequestCode.PULL_MESSAGE, pull)
            assert r.code != ResponseCode.NO_PERMISSION, r
            r = await signed(b, RequestCode.PULL_MESSAGE, {**pull, "topic": "topicD"})
            assert denied(r, "No permission for topic:topicD"), r
            r = await signed(
                b, RequestCode.PULL_MESSAGE, {**pull, "topic": "topicB", "consumerGroup": "groupA"}
            )
            assert denied(r, "No permission for group:groupA"), r
            # Heart beat: every subscribed topic SUB.
            r = await signed(b, RequestCode.HEART_BEAT, {}, heartbeat("groupB", "topicA"))
            assert denied(r, "No permission for topic:topicA"), r
            hb_ok = heartbeat("groupB", "topicB")
            assert (await signed(b, RequestCode.HEART_BEAT, {}, hb_ok)).code == ResponseCode.SUCCESS
            # Codes without resources just need a valid signature.
            assert (await signed(b, RequestCode.GET_BROKER_RUNTIME_INFO, {})).code == ResponseCode.SUCCESS
            r = await signed(b, RequestCode.GET_BROKER_RUNTIME_INFO, {}, keys=None)
            assert denied(r, "No accessKey"), r
            # Admin-only codes.
            create = {"topic": "newTopic", "defaultTopic": "TBW102", "readQueueNums": "4",
                      "writeQueueNums": "4", "perm": "6", "topicFilterType": "SINGLE_TAG",
                      "topicSysFlag": "0", "order": "false"}  # fmt: skip
            r = await signed(b, RequestCode.UPDATE_AND_CREATE_TOPIC, create)
            assert denied(r, "Need admin permission for request code=17, but accessKey=RocketMQ"), r
            r = await signed(b, RequestCode.UPDATE_AND_CREATE_TOPIC, create, keys=ADMIN)
            assert r.code == ResponseCode.SUCCESS, r
            # The admin (no topicPerms) may send anywhere.
            r = await signed(b, RequestCode.SEND_MESSAGE_V2, send_ext("newTopic"), b"x", keys=ADMIN)
            assert r.code == ResponseCode.SUCCESS, r

    run(scenario())


def test_white_lists_and_reload(tmp_path: Path) -> None:
    acl_file = write_acl(tmp_path / "plain_acl.yml", ACL_YML)

    async def scenario() -> None:
        async with broker_under_test(tmp_path / "store", acl_enable=True, acl_config_file=str(acl_file)) as b:
            validator = b.controller.acl
            assert isinstance(validator, AclValidator)
            r = await signed(b, RequestCode.SEND_MESSAGE_V2, send_ext("topicB"), b"x", keys=None)
            assert denied(r, "No accessKey"), r
            # Global white list: 127.0.0.* needs no keys at all.
            write_acl(acl_file, ACL_YML.replace("  - 192.168.0.*", "  - 127.0.0.*"))
            os.utime(acl_file, ns=(time.time_ns(), time.time_ns() + 5_000_000_000))
            validator.reload_check_s = 0.0
            r = await signed(b, RequestCode.SEND_MESSAGE_V2, send_ext("topicA"), b"x", keys=None)
            assert r.code == ResponseCode.SUCCESS, r
            # The account's own whiteRemoteAddress: no signature check and no perm check.
            write_acl(
                acl_file, ACL_YML.replace("whiteRemoteAddress: 192.168.1.*", "whiteRemoteAddress: 127.0.0.1")
            )
            os.utime(acl_file, ns=(time.time_ns(), time.time_ns() + 10_000_000_000))
            r = await signed(b, RequestCode.SEND_MESSAGE_V2, send_ext("topicA"), b"x", keys=None)
            assert denied(r, "No accessKey"), r
            r = await b.call(
                RequestCode.SEND_MESSAGE_V2, {**send_ext("topicX"), "AccessKey": "rocketmq2"}, b"x"
            )
            assert r.code == ResponseCode.SUCCESS, r
            # A broken file keeps the last good config.
            write_acl(acl_file, "accounts: [ {accessKey: x")
            os.utime(acl_file, ns=(time.time_ns(), time.time_ns() + 15_000_000_000))
            r = await b.call(
                RequestCode.SEND_MESSAGE_V2, {**send_ext("topicX"), "AccessKey": "rocketmq2"}, b"x"
            )
            assert r.code == ResponseCode.SUCCESS, r
            assert "rocketmq2" in validator.config.accounts

    run(scenario())


def test_reload_is_throttled(tmp_path: Path) -> None:
    acl_file = write_acl(tmp_path / "plain_acl.yml", ACL_YML)
    validator = AclValidator(acl_file, reload_check_s=3600)
    validator.maybe_reload()  # arms the throttle
    write_acl(acl_file, ACL_YML.replace("rocketmq2", "rocketmq3"))
    assert not validator.maybe_reload()
    assert validator.maybe_reload(force=True)
    assert "rocketmq3" in validator.config.accounts


# -- real clients ---------------------------------------------------------------------------------------
REAL_ACL_YML = """\
accounts:
  - accessKey: onsAccessKey
    secretKey: onsSecretKey
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - {topic}=PUB|SUB
"""


@pytest.fixture
def acl_cluster(tmp_path: Path) -> Any:
    topic = unique("AclTopic")
    acl_file = write_acl(tmp_path / "plain_acl.yml", REAL_ACL_YML.format(topic=topic))
    with embedded(tmp_path / "store", acl_enable=True, acl_config_file=str(acl_file)) as c:
        create_topic(c, topic)
        yield c, topic


@pytest.fixture
def clients(tmp_path: Path) -> Any:
    c = Clients(tmp_path)
    try:
        yield c
    finally:
        c.close()


def _run_producer(clients: Clients, kind: str, cluster: EmbeddedCluster, topic: str, keys: tuple[str, str],
                  bodies: list[str]) -> tuple[int, list[dict[str, Any]]]:  # fmt: skip
    spec = json.dumps({"messages": [msg_spec(kind, topic, body) for body in bodies]})
    argv = ["--namesrv", cluster.namesrv_addr, "--group", unique("acl_pg"), "--spec", spec,
            "--access-key", keys[0], "--secret-key", keys[1]]  # fmt: skip
    argv += ["--timeout-ms", "30000"] if kind == "ons" else ["--timeout-s", "30"]
    cp = clients._spawn(kind, "producer", argv)
    cp.drain(40)
    rc = cp.proc.wait(timeout=10)
    return rc, cp.events


def test_ons_producer_and_consumer_with_keys(acl_cluster: Any, clients: Clients) -> None:
    cluster, topic = acl_cluster
    rc, events = _run_producer(clients, "ons", cluster, topic, ("onsAccessKey", "onsSecretKey"), ["a1", "a2"])
    assert rc == 0 and [e["event"] for e in events] == ["sent", "sent", "done"], events
    # Wrong secret: every send fails (ali-ons reports "Send [4] times, still failed", not the remark).
    rc, events = _run_producer(clients, "ons", cluster, topic, ("onsAccessKey", "wrongSecret"), ["b1"])
    assert rc != 0 and not [e for e in events if e["event"] == "sent"], events

    group = unique("acl_cg")
    argv = ["--namesrv", cluster.namesrv_addr, "--group", group, "--topic", topic, "--timeout-ms", "60000",
            "--access-key", "onsAccessKey", "--secret-key", "onsSecretKey"]  # fmt: skip
    cp = clients._spawn("ons", "consumer", argv)
    cp.wait_event("ready", 30)
    got = cp.collect(lambda evs: len(evs) >= 2, 30, "the two signed messages")
    assert sorted(str(e["body"]) for e in got) == ["a1", "a2"]
    cp.stop()


def test_ons_consumer_with_wrong_keys_gets_nothing(acl_cluster: Any, clients: Clients) -> None:
    cluster, topic = acl_cluster
    rc, _ = _run_producer(clients, "ons", cluster, topic, ("onsAccessKey", "onsSecretKey"), ["c1"])
    assert rc == 0
    argv = ["--namesrv", cluster.namesrv_addr, "--group", unique("acl_cg"), "--topic", topic,
            "--timeout-ms", "30000",
            "--access-key", "onsAccessKey", "--secret-key", "wrongSecret"]  # fmt: skip
    cp = clients._spawn("ons", "consumer", argv)
    # ali-ons' consumer start fails on the broker's answer (GET_CONSUMER_LIST_BY_GROUP is denied).
    with pytest.raises(AssertionError, match="Check signature failed for accessKey=onsAccessKey"):
        cp.wait_event("ready", 30)
    assert not cp.received(), cp.events


def test_cpp_producer_with_keys(acl_cluster: Any, clients: Clients) -> None:
    cluster, topic = acl_cluster
    rc, events = _run_producer(clients, "cpp", cluster, topic, ("onsAccessKey", "onsSecretKey"), ["d1"])
    assert rc == 0 and events[0]["event"] == "sent", events
    rc, events = _run_producer(clients, "cpp", cluster, topic, ("onsAccessKey", "wrongSecret"), ["d2"])
    assert rc != 0 and events[0]["event"] == "send_error", events
