"""The RocketMQ 4.x-compatible name server: routes, broker registration and expiry, KV config.

`NameServer(NamesrvConfig(...))` is the entry point; `RouteInfoManager` and `KVConfigManager` hold
the state and can be used without sockets; `processor.py` maps request codes to handlers.
"""

from rocketlite.namesrv.config import NamesrvConfig
from rocketlite.namesrv.kv_config import NAMESPACE_ORDER_TOPIC_CONFIG, KVConfigManager
from rocketlite.namesrv.processor import NamesrvProcessor
from rocketlite.namesrv.route_info import BrokerLiveInfo, RegisterResult, RouteInfoManager
from rocketlite.namesrv.server import NameServer
from rocketlite.protocol.bodies.route import register_body_crc32

__all__ = [
    "NAMESPACE_ORDER_TOPIC_CONFIG",
    "BrokerLiveInfo",
    "KVConfigManager",
    "NameServer",
    "NamesrvConfig",
    "NamesrvProcessor",
    "RegisterResult",
    "RouteInfoManager",
    "register_body_crc32",
]
