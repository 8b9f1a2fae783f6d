"""ACL 2.0's model without a broker: which policy entry decides a request (the most specific
resource, Custom before Default, source IPs), and which resources and actions each remoting
request needs, as RocketMQ 5.3 maps them (`broker/auth/contexts.py`). The broker that applies
them over 127.0.0.1 is tests/broker/test_acl2.py.
"""

from __future__ import annotations

import json

from rocketlite.broker.auth.contexts import remoting_needs
from rocketlite.broker.auth.model import (
    Acl,
    Action,
    Decision,
    Policy,
    PolicyEntry,
    PolicyType,
    Resource,
    decide,
)
from rocketlite.protocol.codes import RequestCode
from rocketlite.protocol.wire.auth import AuthRequestCode as A
from rocketlite.protocol.wire.command import make_request


def test_the_most_specific_entry_decides() -> None:
    def entry(resource: str, decision: Decision, *actions: Action, ips: tuple[str, ...] = ()) -> PolicyEntry:
        parsed = Resource.parse(resource)
        assert parsed is not None
        return PolicyEntry(parsed, actions or (Action.ALL,), decision, ips)

    acl = Acl(
        "User:u",
        (
            Policy(
                PolicyType.CUSTOM,
                (
                    entry("*", Decision.DENY),
                    entry("Topic:*", Decision.ALLOW, Action.PUB),
                    entry("Topic:pay*", Decision.DENY, Action.PUB),
                    entry("Topic:payroll", Decision.ALLOW, Action.PUB),
                    entry("Topic:lan", Decision.ALLOW, Action.SUB, ips=("192.168.1.0/24",)),
                ),
            ),
            Policy(PolicyType.DEFAULT, (entry("Group:*", Decision.ALLOW, Action.SUB),)),
        ),
    )

    def verdict(resource: Resource, action: Action, ip: str = "10.1.1.1") -> str | None:
        found = decide(acl, resource, (action,), ip)
        return None if found is None else f"{found.resource.key}={found.decision.value}"

    assert verdict(Resource.topic("payroll"), Action.PUB) == "Topic:payroll=Allow"
    assert verdict(Resource.topic("payments"), Action.PUB) == "Topic:pay*=Deny"
    assert verdict(Resource.topic("news"), Action.PUB) == "Topic:*=Allow"
    assert verdict(Resource.topic("news"), Action.SUB) == "*=Deny"
    assert verdict(Resource.topic("lan"), Action.SUB, "192.168.1.7") == "Topic:lan=Allow"
    assert verdict(Resource.topic("lan"), Action.SUB, "192.168.2.7") == "*=Deny"
    # the Default policy is read only when the Custom one has no match
    assert verdict(Resource.group("%RETRY%app"), Action.SUB) == "*=Deny"
    assert (
        decide(Acl("User:u", acl.policies[1:]), Resource.group("%RETRY%app"), (Action.SUB,), "1.1.1.1")
        is not None
    )
    assert Resource.group("%RETRY%app").key == "Group:app"


def test_requests_map_to_resources_and_actions_as_rocketmq_5_3() -> None:
    def needs(code: int, ext: dict[str, str], body: bytes | None = None) -> list[tuple[str, list[str]]]:
        request = make_request(code, ext, body)
        return [(r.key, [a.value for a in acts]) for r, acts in remoting_needs(request, "C1")]

    assert needs(RequestCode.SEND_MESSAGE_V2, {"a": "pg", "b": "t1"}) == [("Topic:t1", ["Pub"])]
    assert needs(RequestCode.SEND_MESSAGE_V2, {"a": "g1", "b": "%RETRY%g1"}) == [("Group:g1", ["Sub"])]
    assert needs(RequestCode.PULL_MESSAGE, {"topic": "t1", "consumerGroup": "g1"}) == [
        ("Topic:t1", ["Sub"]),
        ("Group:g1", ["Sub"]),
    ]
    assert needs(200050, {"topic": "t1", "consumerGroup": "g1"}) == [
        ("Group:g1", ["Sub"]),
        ("Topic:t1", ["Sub"]),
    ]
    assert needs(RequestCode.UPDATE_CONSUMER_OFFSET, {"topic": "t1", "consumerGroup": "g1"}) == [
        ("Topic:t1", ["Sub", "Update"]),
        ("Group:g1", ["Sub", "Update"]),
    ]
    assert needs(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "t1"}) == [("Topic:t1", ["Create"])]
    assert needs(RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "g1"}) == [("Group:g1", ["Delete"])]
    assert needs(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "g", "topicList": "a;b"}) == [
        ("Group:g", ["Get"]),
        ("Topic:a", ["Get"]),
        ("Topic:b", ["Get"]),
    ]
    assert needs(A.AUTH_CREATE_USER, {"username": "u"}) == [("Cluster:C1", ["Update"])]
    assert needs(A.AUTH_LIST_ACL, {}) == []  # no ext fields at all: nothing to read, as Java
    assert needs(A.AUTH_LIST_ACL, {"subjectFilter": "x"}) == [("Cluster:C1", ["Get"])]
    assert needs(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {"x": "y"}) == []
    heartbeat = json.dumps(
        {
            "clientID": "c",
            "producerDataSet": [],
            "consumerDataSet": [
                {
                    "groupName": "g1",
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": "CLUSTERING",
                    "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
                    "unitMode": False,
                    "subscriptionDataSet": [
                        {"topic": "t1", "subString": "*"},
                        {"topic": "%RETRY%g1", "subString": "*"},
                    ],
                }
            ],
        }
    ).encode()
    assert needs(RequestCode.HEART_BEAT, {"x": "y"}, heartbeat) == [
        ("Group:g1", ["Sub"]),
        ("Topic:t1", ["Sub"]),
    ]
