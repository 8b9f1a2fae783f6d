"""The rows both data sources produce: one per message, the same columns for broker and store reads."""

from __future__ import annotations

from typing import Final

COLUMNS: Final = (
    "topic",
    "brokerName",
    "queueId",
    "queueOffset",
    "commitLogOffset",
    "msgId",
    "keys",
    "tags",
    "body",
    "properties",
    "bornTimestamp",
    "storeTimestamp",
    "reconsumeTimes",
)

SPARK_DDL: Final = (
    "topic STRING, brokerName STRING, queueId INT, queueOffset BIGINT, commitLogOffset BIGINT, "
    "msgId STRING, keys STRING, tags STRING, body BINARY, properties MAP<STRING, STRING>, "
    "bornTimestamp TIMESTAMP, storeTimestamp TIMESTAMP, reconsumeTimes INT"
)
"""`DataSource.schema()` of `rocketmq` and `rocketmq-store` (column order as `COLUMNS`)."""
