"""Consumption over gRPC: QueryAssignment, ReceiveMessage (server streaming), AckMessage,
ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue, each turned into the broker's own POP
service calls in process, as Java's proxy turns them into POP requests.

Not served yet: each answers gRPC UNIMPLEMENTED."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.grpc.kit import ProtoKit
from rocketlite.broker.grpc.route import RouteService
from rocketlite.broker.processors.pop import PopMessageProcessor
from rocketlite.broker.subscription_group import SubscriptionGroupManager
from rocketlite.broker.topic_config import TopicConfigManager


class ConsumerService:
    def __init__(
        self,
        kit: ProtoKit,
        broker: BrokerConfig,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        pop: PopMessageProcessor,
        route: RouteService,
    ) -> None:
        self.kit = kit
        self.broker = broker
        self.topics = topics
        self.groups = groups
        self.pop = pop
        self.route = route

    async def query_assignment(self, request: Any, context: Any) -> Any:
        del request
        await self.kit.not_served(context)

    async def receive_message(self, request: Any, context: Any) -> AsyncIterator[Any]:
        del request
        await self.kit.not_served(context)
        return
        yield  # an async generator: ReceiveMessage is server streaming

    async def ack_message(self, request: Any, context: Any) -> Any:
        del request
        await self.kit.not_served(context)

    async def change_invisible_duration(self, request: Any, context: Any) -> Any:
        del request
        await self.kit.not_served(context)

    async def forward_message_to_dead_letter_queue(self, request: Any, context: Any) -> Any:
        del request
        await self.kit.not_served(context)
