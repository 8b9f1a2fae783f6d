"""Live configuration: UPDATE_BROKER_CONFIG (25), GET_BROKER_CONFIG (26), topic reload.

`BrokerConfig` (frozen but for its live fields) and `StoreConfig` (frozen, owned by the store)
are shared by every component that reads them; `LiveConfig` is the one place they change after
start. An update (a properties text, as mqadmin `updateBrokerConfig -k K -v V` sends it):

1. keys naming a path or directory are refused with NO_PERMISSION, as Java refuses
   `brokerConfigPath` (a remote path write is how CVE-2023-37582-style attacks work);
2. unknown keys are refused (SYSTEM_ERROR naming them) — nothing is applied;
3. the new values are converted and validated by building the configs anew with them
   (`__post_init__` checks run); a bad value is refused the same way;
4. a key whose value actually changes must be a live key (`LIVE_KEYS`: permissions, flush and
   commit intervals, retention, timeouts, HA tuning, polling...); structural ones (names, ids,
   role, ports, paths, segment sizes, flush type...) are refused: edit broker.conf and restart;
5. the changed broker fields are written into the shared `BrokerConfig` (only its live fields
   can change), the store takes a new `StoreConfig` and retunes its services
   (`MessageStore.apply_live_settings`), listeners are told (the HA slave reconnects on a new
   `haMasterAddress`), and a `brokerPermission` change re-registers at once with every name
   server (the registered topic permissions are masked by it, so clients stop writing to a
   read-only broker and stop reading from a write-only one).

Components read these configs on every use, so a change takes effect on the next request; it
lasts until restart (put it in broker.conf to keep it). GET_BROKER_CONFIG answers every key as
`key=value` lines, with the config's data version (bumped by every applied update) in the
`version` header.

`reload_topics` re-reads topics.json (MetaQ's `reload`): an operator may edit the file and send
SIGHUP to `rocketlite broker`. Closing and opening a topic's queues at run time needs no new verb:
UPDATE_AND_CREATE_TOPIC (17) with `perm` 4 (read only: writes refused) / 2 (write only) / 6, or with
`writeQueueNums` below `readQueueNums` (the queues above stay readable, no producer picks them);
the send and pull paths read the topic's config on every request.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from rocketlite.broker.config import LIVE_BROKER_FIELDS, BrokerConfig
from rocketlite.broker.subscription_group import SubscriptionGroupManager
from rocketlite.broker.topic_config import TopicConfigManager
from rocketlite.clock import Clock
from rocketlite.config import build_config, config_keys, key_of, parse_properties
from rocketlite.protocol.bodies.route import DataVersion
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.errors import ConfigError, RocketliteError
from rocketlite.protocol.wire.command import RemotingCommand, make_response
from rocketlite.protocol.wire.custom_header import CustomHeader
from rocketlite.remoting.connection import Connection
from rocketlite.store.api import StoreAPI
from rocketlite.store.config import LIVE_STORE_FIELDS, StoreConfig

log = logging.getLogger("rocketlite.broker.live_config")

_PATH_WORDS: Final = ("path", "dir", "home")  # storePathRootDir, brokerConfigPath, rocketmqHome...


def _keys_of(cls: type[Any], fields: frozenset[str]) -> set[str]:
    return {key_of(f) for f in dataclasses.fields(cls) if f.name in fields}


LIVE_KEYS: Final = frozenset(
    _keys_of(BrokerConfig, LIVE_BROKER_FIELDS) | _keys_of(StoreConfig, LIVE_STORE_FIELDS)
)

ConfigListener = Callable[[set[str]], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class GetBrokerConfigResponseHeader(CustomHeader):
    version: str


def config_properties(*configs: Any) -> str:
    """Configs as Java properties text (`key=value` lines, RocketMQ key names, nulls left out)."""
    lines: dict[str, str] = {}
    for cfg in configs:
        for f in dataclasses.fields(cfg):
            value = getattr(cfg, f.name)
            if value is None:
                continue
            if isinstance(value, bool):
                text = "true" if value else "false"
            elif isinstance(value, enum.Enum):
                text = str(value.value)
            else:
                text = str(value)
            lines[key_of(f)] = text
    return "".join(f"{k}={v}\n" for k, v in sorted(lines.items()))


def _rebuilt(cfg: Any, props: Mapping[str, str]) -> Any:
    """`cfg` with the keys of `props` converted and applied, validated by the class."""
    cls = type(cfg)
    named: set[str] = set()
    for f in dataclasses.fields(cls):
        if any(name in props for name in (key_of(f), *f.metadata.get("aliases", ()))):
            named.add(f.name)
    keep = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cls) if f.name not in named}
    return build_config(cls, props, **keep)


def _changes(old: Any, new: Any) -> dict[str, tuple[str, Any]]:
    """field name -> (key, new value) for every field whose value differs."""
    return {
        f.name: (key_of(f), getattr(new, f.name))
        for f in dataclasses.fields(old)
        if getattr(old, f.name) != getattr(new, f.name)
    }


class LiveConfig:
    """Validates and applies run-time configuration changes; answers 25 / 26."""

    def __init__(
        self,
        broker: BrokerConfig,
        store: StoreAPI,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        clock: Clock,
        request_register: Callable[[], None],
        *,
        listeners: Sequence[ConfigListener] = (),
    ) -> None:
        self.broker = broker
        self.store = store
        self.topics = topics
        self.groups = groups
        self.clock = clock
        self.request_register = request_register
        self.version = DataVersion(timestamp=clock.now_ms())
        self.listeners = tuple(listeners)  # told the changed keys after every applied update

    # -- updates ----------------------------------------------------------------------------
    def update(self, props: Mapping[str, str]) -> set[str]:
        """Apply `props` (RocketMQ key -> text) atomically; returns the keys that changed.

        Raises `RocketliteError` (NO_PERMISSION for path keys, SYSTEM_ERROR otherwise) and then
        changes nothing.
        """
        if any(word in key.lower() for key in props for word in _PATH_WORDS):
            raise RocketliteError("Can not update config path", code=ResponseCode.NO_PERMISSION)
        broker_keys, store_keys = config_keys(BrokerConfig), config_keys(StoreConfig)
        unknown = sorted(k for k in props if k not in broker_keys | store_keys)
        if unknown:
            raise RocketliteError(f"unknown config keys: {', '.join(unknown)}; nothing changed")
        try:
            new_broker = _rebuilt(self.broker, {k: v for k, v in props.items() if k in broker_keys})
            new_store = _rebuilt(self.store.config, {k: v for k, v in props.items() if k in store_keys})
        except ConfigError as exc:
            raise RocketliteError(f"{exc}; nothing changed") from exc
        broker_changes = _changes(self.broker, new_broker)
        store_changes = _changes(self.store.config, new_store)
        fixed = sorted(
            [key for name, (key, _) in broker_changes.items() if name not in LIVE_BROKER_FIELDS]
            + [key for name, (key, _) in store_changes.items() if name not in LIVE_STORE_FIELDS]
        )
        if fixed:
            raise RocketliteError(
                f"{', '.join(fixed)} cannot change while the broker runs; set it in broker.conf and "
                "restart (nothing changed)"
            )
        for name, (_, value) in broker_changes.items():
            setattr(self.broker, name, value)  # live fields only (`BrokerConfig.__setattr__`)
        if store_changes:  # a new store config, the services retuned
            self.store.apply_live_settings({name: value for name, (_, value) in store_changes.items()})
        changed = {key for key, _ in broker_changes.values()} | {key for key, _ in store_changes.values()}
        if changed:
            self._applied(changed)
        return changed

    def _applied(self, changed: set[str]) -> None:
        self.version = self.version.next_version(self.clock.now_ms())
        self.groups.auto_create = self.broker.auto_create_subscription_group
        if "brokerPermission" in changed:
            # Java: topicConfigManager.getDataVersion().nextVersion(); registerBrokerAll(...)
            self.topics.data_version = self.topics.data_version.next_version(self.clock.now_ms())
            self.request_register()
        for listener in self.listeners:
            try:
                listener(changed)
            except Exception:
                log.exception("a configuration listener failed")
        log.info(
            "configuration changed at run time: %s",
            ", ".join(f"{k}={v}" for k, v in sorted(self.current_properties().items()) if k in changed),
        )

    def set_broker_permission(self, value: int, why: str) -> None:
        """The broker itself changes its permission (a diverged slave stops serving reads)."""
        log.warning("brokerPermission -> %d: %s", value, why)
        self.update({"brokerPermission": str(value)})

    def current_properties(self) -> dict[str, str]:
        text = config_properties(self.broker, self.store.config)
        return parse_properties(text)

    # -- topics.json ------------------------------------------------------------------------
    def reload_topics(self) -> int:
        """Re-read topics.json (an operator edited it): replace the table, keep system topics,
        bump the data version and re-register. Returns the number of topics."""
        topics = self.topics
        with topics.lock:
            previous = dict(topics.table)
            topics.table.clear()
            if not topics.load():
                topics.table.update(previous)
                raise RocketliteError(f"cannot read {topics.path}; topics unchanged")
            topics.start()  # re-adds the system topics (and persists)
            topics.data_version = topics.data_version.next_version(self.clock.now_ms())
        topics.persist()
        self.request_register()
        log.info("reloaded %d topics from %s", len(topics.table), topics.path)
        return len(topics.table)

    # -- requests ---------------------------------------------------------------------------
    def handle_get(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        del conn
        body = config_properties(self.broker, self.store.config).encode("utf-8")
        ext = GetBrokerConfigResponseHeader(version=self.version.to_json()).to_ext()
        return make_response(request, ResponseCode.SUCCESS, None, ext, body)

    def handle_update(self, conn: Connection, request: RemotingCommand) -> RemotingCommand:
        props = parse_properties((request.body or b"").decode("utf-8", "replace"))
        if not props:
            return make_response(request, ResponseCode.SUCCESS)
        try:
            changed = self.update(props)
        except RocketliteError as exc:
            log.warning(
                "refused UPDATE_BROKER_CONFIG from %s (%s): %s", conn.remote_address, sorted(props), exc
            )
            raise
        log.info("UPDATE_BROKER_CONFIG from %s changed %s", conn.remote_address, sorted(changed) or "nothing")
        return make_response(request, ResponseCode.SUCCESS)
