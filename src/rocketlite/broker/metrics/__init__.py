"""Broker metrics on `GET /metrics`: RocketMQ 5's families under RocketMQ's names (rocketmq.py),
rocketlite's own where RocketMQ has none (legacy.py), the rpc latency recorder (rpc.py) and the
HTTP endpoint (server.py)."""

from rocketlite.broker.metrics.legacy import BrokerFigures, RocketliteCollector, TpsSampler
from rocketlite.broker.metrics.rocketmq import BrokerView, RocketMQCollector
from rocketlite.broker.metrics.rpc import RpcLatency
from rocketlite.broker.metrics.server import MetricsServer

__all__ = [
    "BrokerFigures",
    "BrokerView",
    "MetricsServer",
    "RocketMQCollector",
    "RocketliteCollector",
    "RpcLatency",
    "TpsSampler",
]
