"""Name server reads: GET_ROUTEINFO_BY_TOPIC (105) and GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206).

Routes are asked for with acceptStandardJsonOnly=true, so `brokerAddrs` keys come back quoted
(standard JSON) from a 4.9.4+ name server; `TopicRouteData.from_json` reads both forms.
TOPIC_NOT_EXIST (17) is a normal answer to a route request and parses as None.
"""

from __future__ import annotations

from rocketlite.protocol.bodies.lists import TopicList
from rocketlite.protocol.bodies.route import TopicRouteData
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.requests.response import expect
from rocketlite.protocol.wire.command import RemotingCommand, make_request
from rocketlite.protocol.wire.headers import GetRouteInfoRequestHeader


def build_get_route(topic: str) -> RemotingCommand:
    ext = GetRouteInfoRequestHeader(topic=topic, accept_standard_json_only=True).to_ext()
    return make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext)


def parse_route(response: RemotingCommand) -> TopicRouteData | None:
    """The topic's route; None when the name server does not know the topic (or sent no body)."""
    code = expect(
        response, RequestCode.GET_ROUTEINFO_BY_TOPIC, (ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST)
    )
    if code == ResponseCode.TOPIC_NOT_EXIST or not response.body:
        return None
    return TopicRouteData.from_json(response.body)


def build_get_all_topics() -> RemotingCommand:
    return make_request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)


def parse_topic_list(response: RemotingCommand) -> list[str]:
    """Every topic the name server knows, sorted."""
    expect(response, RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    return sorted(TopicList.from_json(response.body or b"{}").topic_list)
