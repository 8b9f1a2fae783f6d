"""Broker metrics on `GET /metrics`: RocketMQ 5's families under RocketMQ's names (rocketmq.py),
its timer, POP and transaction families and the controller-mode role and epoch (features.py),
rocketlite's own where RocketMQ has none (legacy.py), the rpc latency recorder (rpc.py) and the
HTTP endpoint (server.py)."""

from rocketlite.broker.metrics.features import FeatureCollector, FeatureView
from rocketlite.broker.metrics.legacy import BrokerFigures, RocketliteCollector, TpsSampler
from rocketlite.broker.metrics.rocketmq import BrokerView, RocketMQCollector
from rocketlite.broker.metrics.rpc import RpcLatency
from rocketlite.broker.metrics.server import MetricsServer

__all__ = [
    "BrokerFigures",
    "BrokerView",
    "FeatureCollector",
    "FeatureView",
    "MetricsServer",
    "RocketMQCollector",
    "RocketliteCollector",
    "RpcLatency",
    "TpsSampler",
]
