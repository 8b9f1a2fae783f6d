"""Auto-registration of `spark.read.format("rocketmq")` (PySpark's Python data source lookup).

PySpark imports every top-level module whose name starts with `pyspark_` and registers its
`DefaultSource` under `DefaultSource.name()`. The implementation is `rocketlite.spark.source`.
"""

from rocketlite.spark.source import RocketMQDataSource as DefaultSource

__all__ = ["DefaultSource"]
