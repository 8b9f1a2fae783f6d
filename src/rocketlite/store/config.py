"""`StoreConfig`: the message store's settings, with RocketMQ's key names and defaults.

Built once from a `broker.conf` (see `rocketlite.config.build_config`) and passed down; nothing in
the store reads configuration any other way. The config is frozen: a running broker changes the
`LIVE_STORE_FIELDS` (UPDATE_BROKER_CONFIG) by handing the store a new one
(`MessageStore.apply_live_settings`), which retunes the services that copied a value. Everything
else (segment sizes, paths, flush type, index geometry, delay levels) shapes files on disk or the
services that exist, and needs a restart.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from rocketlite.config import config_keys, require
from rocketlite.protocol.formats.consume_queue_unit import UNIT_SIZE as CQ_UNIT_SIZE

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


# StoreConfig field names that may change at run time: read by the store on every use (the sync
# flush timeout, a pull's transfer limits, the size limit) or copied by a service that the store
# retunes (intervals, page counts, retention, disk levels).
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


class FlushDiskType(enum.Enum):
    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


def parse_delay_levels(text: str) -> tuple[int, ...]:
    """`"1s 5s 10s ..."` -> delays in ms, level 1 first."""
    levels: list[int] = []
    for token in text.split():
        unit = token[-1:]
        require(unit in _UNIT_MS and token[:-1].isdigit(), f"messageDelayLevel: bad level {token!r}")
        levels.append(int(token[:-1]) * _UNIT_MS[unit])
    require(bool(levels), "messageDelayLevel: no levels")
    return tuple(levels)


@dataclass(frozen=True, slots=True)
class StoreConfig:
    store_path_root_dir: Path = field(default_factory=lambda: Path.home() / "store")
    store_path_commit_log: Path | None = None
    maped_file_size_commit_log: int = field(
        default=1024 * 1024 * 1024, metadata={"aliases": ("mappedFileSizeCommitLog",)}
    )
    maped_file_size_consume_queue: int = field(
        default=300_000 * CQ_UNIT_SIZE, metadata={"aliases": ("mappedFileSizeConsumeQueue",)}
    )
    flush_disk_type: FlushDiskType = FlushDiskType.ASYNC_FLUSH
    flush_interval_commit_log: int = 500
    flush_commit_log_least_pages: int = 4
    flush_commit_log_thorough_interval: int = 10_000
    commit_interval_commit_log: int = 200
    commit_commit_log_least_pages: int = 4
    commit_commit_log_thorough_interval: int = 200
    flush_interval_consume_queue: int = 1000
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval: int = 60_000
    sync_flush_timeout: int = 5000
    max_message_size: int = 4 * 1024 * 1024
    max_hash_slot_num: int = 5_000_000
    max_index_num: int = 20_000_000
    message_index_enable: bool = True
    message_index_safe: bool = False
    file_reserved_time: int = 72
    delete_when: str = "04"
    disk_max_used_space_ratio: int = 75  # above: delete expired segments now
    disk_space_clean_forcibly_ratio: int = 85  # above: delete any segment but the last
    disk_space_warning_level_ratio: int = 90  # above: refuse puts
    clean_file_forcibly_enable: bool = True
    clean_resource_interval: int = 10_000
    transient_store_pool_enable: bool = False
    transient_store_pool_size: int = 5  # segment write buffers in use at once; more: SYSTEM_BUSY
    # Read new commit-log segments through off the append path (allocate.py says what it costs).
    warm_maped_file_enable: bool = field(default=False, metadata={"aliases": ("warmMappedFileEnable",)})
    check_crc_on_recover: bool = field(default=True, metadata={"key": "checkCRCOnRecover"})
    fast_boot: bool = False
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    max_transfer_bytes_on_message_in_memory: int = 256 * 1024
    max_transfer_count_on_message_in_memory: int = 32
    duplication_enable: bool = False
    # 5.x timer messages (broker/delay/timer/): on or off, the furthest delivery time accepted, and how
    # often the delivery progress is written (what a crash may deliver again).
    timer_wheel_enable: bool = True
    timer_max_delay_sec: int = 3 * 24 * 3600
    timer_flush_interval_ms: int = 1000

    def __post_init__(self) -> None:
        require(
            self.maped_file_size_commit_log >= 4096,
            f"mapedFileSizeCommitLog must be at least 4096 bytes, got {self.maped_file_size_commit_log}",
        )
        require(
            self.maped_file_size_consume_queue >= CQ_UNIT_SIZE,
            f"mapedFileSizeConsumeQueue must be at least {CQ_UNIT_SIZE}",
        )
        require(1 <= self.max_message_size <= 64 * 1024 * 1024, "maxMessageSize must be in 1..64 MiB")
        require(self.max_hash_slot_num > 0, "maxHashSlotNum must be positive")
        require(self.max_index_num > 1, "maxIndexNum must be greater than 1")
        require(self.sync_flush_timeout > 0, "syncFlushTimeout must be positive")
        require(self.transient_store_pool_size >= 2, "transientStorePoolSize must be at least 2")
        require(self.flush_interval_commit_log > 0, "flushIntervalCommitLog must be positive")
        require(10 <= self.disk_max_used_space_ratio <= 95, "diskMaxUsedSpaceRatio must be in 10..95")
        for key, value in (
            ("diskSpaceCleanForciblyRatio", self.disk_space_clean_forcibly_ratio),
            ("diskSpaceWarningLevelRatio", self.disk_space_warning_level_ratio),
        ):
            require(10 <= value <= 100, f"{key} must be in 10..100 (100: never), got {value}")
        require(self.file_reserved_time > 0, "fileReservedTime must be positive (hours)")
        for hour in self.delete_when.split(";"):
            require(hour.strip().isdigit() and 0 <= int(hour) <= 23, f"deleteWhen: bad hour {hour!r}")
        parse_delay_levels(self.message_delay_level)
        require(self.timer_max_delay_sec > 0, "timerMaxDelaySec must be positive")
        require(self.timer_flush_interval_ms > 0, "timerFlushIntervalMs must be positive")

    @property
    def cq_file_size(self) -> int:
        """CQ files hold whole 20-byte units, as RocketMQ rounds them."""
        return self.maped_file_size_consume_queue // CQ_UNIT_SIZE * CQ_UNIT_SIZE

    @property
    def commit_log_dir(self) -> Path:
        return self.store_path_commit_log or self.store_path_root_dir / "commitlog"

    @property
    def consume_queue_dir(self) -> Path:
        return self.store_path_root_dir / "consumequeue"

    @property
    def index_dir(self) -> Path:
        return self.store_path_root_dir / "index"

    @property
    def config_dir(self) -> Path:
        return self.store_path_root_dir / "config"

    @property
    def checkpoint_path(self) -> Path:
        return self.store_path_root_dir / "checkpoint"

    @property
    def abort_path(self) -> Path:
        return self.store_path_root_dir / "abort"

    @property
    def delay_levels_ms(self) -> tuple[int, ...]:
        return parse_delay_levels(self.message_delay_level)

    @property
    def verify_crc(self) -> bool:
        return self.check_crc_on_recover and not self.fast_boot


def store_config_keys() -> frozenset[str]:
    """Every store key a `broker.conf` may set, spelling aliases included
    (`mappedFileSizeCommitLog`). docs/configuration.md names each of them."""
    return frozenset(config_keys(StoreConfig))
