"""QueryRoute: a topic's queues as 5.x clients need them, each with its permission, the message
types it accepts, and this broker's gRPC address (clients connect to what the route says, not to
the address they asked).

Topics declare no message type here (RocketMQ 5's topic attribute `message.type`), so every queue
accepts the four types the endpoint serves: the clients refuse to send a type the route omits.

An unknown topic answers TOPIC_NOT_FOUND with the text of RocketMQ 5's proxy (`no_route`), which
the clients show in their NotFoundException and the Node client's own tests match."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.grpc.kit import ProtoKit
from rocketlite.broker.topic_config import TopicConfigManager
from rocketlite.protocol import perm
from rocketlite.protocol.codes import ResponseCode

ACCEPTED_TYPES = ("NORMAL", "FIFO", "DELAY", "TRANSACTION")
_FAQ = "\nFor more information, please visit the url, https://rocketmq.apache.org/docs/bestPractice/06FAQ"


def no_route(topic: str) -> str:
    """The proxy's status text for a topic without a route: the message of its
    MQClientException(TOPIC_NOT_EXIST, ...), FAQUrl.attachDefaultURL's line included."""
    desc = f"No topic route info in name server for the topic: {topic}"
    return f"CODE: {int(ResponseCode.TOPIC_NOT_EXIST)}  DESC: {desc}{_FAQ}"


class RouteService:
    """`port` gives the endpoint's bound port (known only once the server is started)."""

    def __init__(
        self, kit: ProtoKit, broker: BrokerConfig, topics: TopicConfigManager, port: Callable[[], int]
    ) -> None:
        self.kit = kit
        self.broker = broker
        self.topics = topics
        self.port = port

    def endpoints(self) -> Any:
        """This listener as clients reach it: the broker's advertised IP and the bound port."""
        pb = self.kit.pb
        return pb.Endpoints(
            scheme=pb.AddressScheme.Value("IPv4"),
            addresses=[pb.Address(host=self.broker.broker_ip1, port=self.port())],
        )

    async def query_route(self, request: Any, context: Any) -> Any:
        del context
        pb, kit = self.kit.pb, self.kit
        topic = request.topic.name
        tc = self.topics.select(topic)
        if tc is None:
            return kit.spb.QueryRouteResponse(status=kit.status("TOPIC_NOT_FOUND", no_route(topic)))
        broker = pb.Broker(name=self.broker.broker_name, id=0, endpoints=self.endpoints())
        topic_perm = tc.perm & self.broker.broker_permission
        types = [pb.MessageType.Value(name) for name in ACCEPTED_TYPES]
        queues = []
        for queue_id in range(max(tc.read_queue_nums, tc.write_queue_nums)):
            readable = perm.is_readable(topic_perm) and queue_id < tc.read_queue_nums
            writeable = perm.is_writeable(topic_perm) and queue_id < tc.write_queue_nums
            name = {(True, True): "READ_WRITE", (True, False): "READ", (False, True): "WRITE"}.get(
                (readable, writeable), "NONE"
            )
            queues.append(
                pb.MessageQueue(
                    topic=request.topic,
                    id=queue_id,
                    permission=pb.Permission.Value(name),
                    broker=broker,
                    accept_message_types=types,
                )
            )
        return kit.spb.QueryRouteResponse(status=kit.status("OK"), message_queues=queues)
