"""The broker's optional doors besides the remoting port, each built only when configured:
GET /metrics (`metricsExporterType=PROM`, or rocketlite's older `metricsPort`) and the 5.x gRPC
endpoint (`grpcServerPort`, masters only).

Kept out of `controller.py` so the composition root reads as the list of parts; what each door
needs is given to it here as arguments, as every other part gets its collaborators.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rocketlite.broker.acl import AclValidator
from rocketlite.broker.auth.checks import AuthChecks
from rocketlite.broker.client_manager import ClientManager
from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.grpc import unavailable_reason
from rocketlite.broker.metrics import (
    BrokerFigures,
    BrokerView,
    FeatureCollector,
    FeatureView,
    MetricsServer,
    RocketliteCollector,
    RocketMQCollector,
    TpsSampler,
)
from rocketlite.broker.pop.processor import PopMessageProcessor
from rocketlite.broker.processors.send import SendMessageProcessor
from rocketlite.broker.subscription_group import SubscriptionGroupManager
from rocketlite.broker.topic_config import TopicConfigManager
from rocketlite.broker.transaction import TransactionalMessageService
from rocketlite.store.config import StoreConfig

if TYPE_CHECKING:
    from rocketlite.broker.grpc.endpoint import GrpcEndpoint

log = logging.getLogger("rocketlite.broker")


def metrics_server(view: BrokerView, features: FeatureView, figures: BrokerFigures) -> MetricsServer | None:
    """GET /metrics with RocketMQ 5's families, the timer / POP / transaction ones and rocketlite's
    own; None when no endpoint is configured."""
    endpoint = view.broker.metrics_endpoint
    if endpoint is None:
        return None
    sampler = TpsSampler(view.store)
    collectors = [RocketMQCollector(view), FeatureCollector(features), RocketliteCollector(figures, sampler)]
    return MetricsServer(collectors, sampler, *endpoint)


def grpc_endpoint(
    broker: BrokerConfig,
    store_config: StoreConfig,
    topics: TopicConfigManager,
    groups: SubscriptionGroupManager,
    send: SendMessageProcessor,
    pop: PopMessageProcessor,
    transactions: TransactionalMessageService,
    clients: ClientManager,
    *,
    acl: AclValidator | None,
    auth: AuthChecks | None,
) -> GrpcEndpoint | None:
    """The 5.x gRPC endpoint, on masters only (5.x clients use master queues only): off with
    grpcServerPort 0 or without grpcio (said once); an ephemeral port when listenPort is 0. With
    aclEnable every RPC is checked against the same plain ACL as the remoting port, and with ACL
    2.0 against the same users and policies (`auth`)."""
    if broker.grpc_server_port == 0 or broker.is_slave:
        return None
    reason = unavailable_reason()
    if reason is not None:
        log.warning("5.x gRPC endpoint off: %s", reason)
        return None
    from rocketlite.broker.grpc.endpoint import GrpcEndpoint  # noqa: PLC0415 (needs the grpc extra)

    return GrpcEndpoint(
        broker, topics, groups, send, pop,
        host=broker.listen_host,
        port=broker.grpc_server_port if broker.listen_port else 0,
        max_body_size=store_config.max_message_size,
        acl=acl,
        auth=auth,
        transactions=transactions,
        clients=clients,
    )  # fmt: skip
