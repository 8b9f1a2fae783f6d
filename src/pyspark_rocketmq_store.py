"""Auto-registration of `spark.read.format("rocketmq-store")` (see `pyspark_rocketmq`)."""

from rocketlite.spark.store_source import RocketMQStoreDataSource as DefaultSource

__all__ = ["DefaultSource"]
