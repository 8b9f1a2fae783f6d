"""A pipeline for `spark-submit` in tests: read a topic with format("rocketmq"), write it to another
topic with the sink, read that back, and print what happened as one `RESULT {json}` line.

Usage: spark-submit [--master URL] spark_pipeline.py NAME_SERVER SOURCE_TOPIC TARGET_TOPIC
"""

from __future__ import annotations

import json
import os
import sys

from pyspark.sql import SparkSession

import rocketlite.spark  # noqa: F401  (PYSPARK_PYTHON: this interpreter, unless set)


def main(name_server: str, source: str, target: str) -> None:
    spark = SparkSession.builder.appName("rocketlite-pipeline").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.read.format("rocketmq").option("nameServer", name_server).option("subscribe", source).load()
    # Where the data source's read() runs: Python workers of the executors, not this process.
    readers = sorted(set(df.rdd.mapPartitions(lambda rows: [os.getppid()]).collect()))
    (
        df.selectExpr("body", "tags", "keys")
        .write.format("rocketmq")
        .option("nameServer", name_server)
        .option("topic", target)
        .mode("append")
        .save()
    )
    back = spark.read.format("rocketmq").option("nameServer", name_server).option("topic", target).load()
    bodies = sorted(bytes(r.body).decode() for r in back.select("body").collect())
    result = {
        "master": spark.sparkContext.master,
        "partitions": df.rdd.getNumPartitions(),
        "read": df.count(),
        "written_back": bodies,
        "executors": int(spark.sparkContext._jsc.sc().getExecutorIds().size()),  # the driver not counted
        "reader_parents": readers,
        "driver": os.getpid(),
    }
    print("RESULT " + json.dumps(result), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
