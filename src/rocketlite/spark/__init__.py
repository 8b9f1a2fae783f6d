"""rocketlite.spark: PySpark data sources for RocketMQ topics and raw RocketMQ stores.

Install with the extra (`pip install rocketlite[spark]`); the formats register themselves
through the top-level modules `pyspark_rocketmq` and `pyspark_rocketmq_store`::

    df = (spark.read.format("rocketmq")
          .option("nameServer", "127.0.0.1:9876").option("topic", "Clicks").load())
    raw = spark.read.format("rocketmq-store").load("/data/rocketmq/store")

`register(spark)` registers both explicitly (for a session whose Python path lacked them when
the session started). Options, schema and delivery guarantees: see docs/spark.md.

Importing this package sets `PYSPARK_PYTHON` to the running interpreter when the user has not
set it: Spark looks Python data sources up, and runs its Python workers, with the `python3` on
PATH, which is often not the environment rocketlite is installed in. It must happen before the
session's JVM starts (the JVM reads the variable once), so import this before building a session.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from rocketlite.spark.schema import COLUMNS, SPARK_DDL

if TYPE_CHECKING:
    from rocketlite.spark.source import RocketMQDataSource
    from rocketlite.spark.store_source import RocketMQStoreDataSource

__all__ = ["COLUMNS", "SPARK_DDL", "RocketMQDataSource", "RocketMQStoreDataSource", "register"]

if sys.executable:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


def register(spark: Any) -> None:
    """`spark.dataSource.register` for `rocketmq` and `rocketmq-store`."""
    from rocketlite.spark.source import RocketMQDataSource  # noqa: PLC0415
    from rocketlite.spark.store_source import RocketMQStoreDataSource  # noqa: PLC0415

    spark.dataSource.register(RocketMQDataSource)
    spark.dataSource.register(RocketMQStoreDataSource)


def __getattr__(name: str) -> Any:
    # The data sources import pyspark; keep `import rocketlite.spark` (offsets, options) light.
    if name == "RocketMQDataSource":
        from rocketlite.spark.source import RocketMQDataSource  # noqa: PLC0415

        return RocketMQDataSource
    if name == "RocketMQStoreDataSource":
        from rocketlite.spark.store_source import RocketMQStoreDataSource  # noqa: PLC0415

        return RocketMQStoreDataSource
    raise AttributeError(name)
