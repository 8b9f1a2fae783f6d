"""Store settings a running broker may change (UPDATE_BROKER_CONFIG), and how they reach the services.

`StoreConfig` is frozen for everyone but the broker's live configuration (`broker/live_config.py`),
which validates a change, writes it into the shared config object, then calls
`apply_live_settings`: values the store reads on every use (`syncFlushTimeout`, the transfer limits
of a pull) need nothing more; values a service copied when it was built (intervals, page counts,
retention) are pushed into it here, and the service is woken so a new interval applies at once.

Everything else in `StoreConfig` (segment sizes, paths, flush type, index geometry, delay levels)
shapes files on disk or the services that exist, and needs a restart.
"""

from __future__ import annotations

from typing import Final

from rocketlite.store.clean import CleanService, DiskThresholds
from rocketlite.store.flush import CommitRealTimeService, FlushConsumeQueueService, FlushRealTimeService
from rocketlite.store.message_store import MessageStore

# StoreConfig field names that may change at run time.
LIVE_STORE_FIELDS: Final = frozenset(
    {
        "flush_interval_commit_log",
        "flush_commit_log_least_pages",
        "flush_commit_log_thorough_interval",
        "commit_interval_commit_log",
        "commit_commit_log_least_pages",
        "commit_commit_log_thorough_interval",
        "flush_interval_consume_queue",
        "flush_consume_queue_least_pages",
        "flush_consume_queue_thorough_interval",
        "sync_flush_timeout",
        "max_message_size",
        "file_reserved_time",
        "delete_when",
        "disk_max_used_space_ratio",
        "disk_space_clean_forcibly_ratio",
        "disk_space_warning_level_ratio",
        "clean_file_forcibly_enable",
        "clean_resource_interval",
        "max_transfer_bytes_on_message_in_memory",
        "max_transfer_count_on_message_in_memory",
    }
)


def apply_live_settings(store: MessageStore) -> None:
    """Push the (already changed) `store.config` into the running services."""
    cfg = store.config
    store.commit_log.max_message_size = cfg.max_message_size
    for svc in store.running_services:
        if isinstance(svc, FlushRealTimeService):
            svc.interval_s = cfg.flush_interval_commit_log / 1000
            svc.least_pages = cfg.flush_commit_log_least_pages
            svc.thorough_interval_ms = cfg.flush_commit_log_thorough_interval
        elif isinstance(svc, CommitRealTimeService):
            svc.interval_s = cfg.commit_interval_commit_log / 1000
            svc.least_pages = cfg.commit_commit_log_least_pages
            svc.thorough_interval_ms = cfg.commit_commit_log_thorough_interval
        elif isinstance(svc, FlushConsumeQueueService):
            svc.interval_s = cfg.flush_interval_consume_queue / 1000
            svc.least_pages = cfg.flush_consume_queue_least_pages
            svc.thorough_interval_ms = cfg.flush_consume_queue_thorough_interval
        elif isinstance(svc, CleanService):
            svc.interval_s = cfg.clean_resource_interval / 1000
            svc.file_reserved_ms = cfg.file_reserved_time * 3_600_000
            svc.delete_hours = {int(h) for h in cfg.delete_when.split(";") if h.strip()}
            svc.thresholds = DiskThresholds.from_config(cfg)
        else:
            continue
        svc.wakeup()
