"""rocketlite: a RocketMQ-compatible message broker in Python.

The store keeps RocketMQ 4.x's on-disk format byte for byte; the broker speaks the 4.x remoting
protocol so unmodified RocketMQ clients work against it.
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
