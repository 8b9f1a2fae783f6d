"""`SlaveSynchronize`: a slave copies the master's config files (RocketMQ's `SlaveSynchronize`).

Every `interval_s` (RocketMQ: 10 s), from the master's broker address (the name server's
`masterAddr`, or derived from `haMasterAddress`):

* GET_ALL_TOPIC_CONFIG (21) -> topics.json, replaced whole when the master's data version differs;
* GET_ALL_CONSUMER_OFFSET (43) -> consumerOffset.json, merged (`putAll`: the master's entries win);
* GET_ALL_DELAY_OFFSET (45) -> delayOffset.json, written as the master sent it;
* GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201) -> subscriptionGroup.json, replaced whole when its data
  version differs.

With `innerClientAuthenticationCredentials` set, each request is signed with them (AccessKey +
Signature, as RocketMQ's broker signs its own requests), so a master with ACL 2.0's
authentication on answers them: the key makes that user a super user on every broker of the group.

So a slave answers route, offset and group questions as its master would, and keeps doing so after
the master is gone. A failed step is logged and retried on the next round.

Beyond RocketMQ, a slave also learns topics from the log it replicates (`TopicLearner`, a dispatch
listener): a queue whose topic it does not know yet (created on the master since the last round)
gets a read-write config covering it, so messages of a topic created seconds before the master died
can still be pulled from the slave. The next round replaces it with the master's config.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path

from rocketlite.atomic_file import write_atomically
from rocketlite.broker.state_files import ConsumerOffsetTable, DelayOffsetTable
from rocketlite.broker.subscription_group import SubscriptionGroupConfig, SubscriptionGroupManager
from rocketlite.broker.topic_config import TopicConfigManager
from rocketlite.protocol import perm
from rocketlite.protocol.bodies.route import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from rocketlite.protocol.codes import RequestCode, ResponseCode
from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.wire import fastjson
from rocketlite.protocol.wire.acl_signature import SessionCredentials
from rocketlite.protocol.wire.command import make_request
from rocketlite.remoting.client import RemotingClient
from rocketlite.runtime import cancel_tasks

log = logging.getLogger("rocketlite.broker.ha")

SYNC_INTERVAL_S = 10.0
_TIMEOUT_S = 3.0


class SlaveSynchronize:
    """Periodic copy of the master's topics, offsets, delay offsets and subscription groups."""

    def __init__(
        self,
        outbound: RemotingClient,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetTable,
        config_dir: Path,
        master_addr: Callable[[], str | None],
        *,
        on_topics_changed: Callable[[], None] = lambda: None,
        interval_s: float = SYNC_INTERVAL_S,
        credentials: SessionCredentials | None = None,
    ) -> None:
        self.outbound = outbound
        self.credentials = credentials  # innerClientAuthenticationCredentials: a master with ACL 2.0
        self.topics = topics
        self.groups = groups
        self.offsets = offsets
        self.delay_path = config_dir / DelayOffsetTable.file_name
        self.master_addr = master_addr
        self.on_topics_changed = on_topics_changed
        self.interval_s = interval_s
        self.rounds = 0
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="broker-slave-sync")

    async def close(self) -> None:
        await cancel_tasks(self._task)

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(0.5 if self.rounds == 0 else self.interval_s)
            if self.master_addr() is None:
                continue  # not known yet: try again soon
            await self.sync_all()

    async def sync_all(self) -> bool:
        """One round; True when every file was fetched."""
        addr = self.master_addr()
        if addr is None:
            return False
        ok = True
        for step in (self.sync_topics, self.sync_offsets, self.sync_delay_offsets, self.sync_groups):
            try:
                await step(addr)
            except (OSError, TimeoutError, ProtocolError, ValueError, KeyError, TypeError) as exc:
                log.warning("slave sync from %s: %s failed: %s", addr, step.__name__, exc)
                ok = False
        self.rounds += 1
        return ok

    async def _fetch(self, addr: str, code: RequestCode) -> bytes:
        request = make_request(code)
        if self.credentials is not None:
            self.credentials.sign_request(request)
        response = await self.outbound.invoke(addr, request, _TIMEOUT_S)
        if response.code != ResponseCode.SUCCESS:
            raise ProtocolError(f"{code.name}: code {response.code} {response.remark or ''}".strip())
        return response.body or b""

    async def _persist(self, persist: Callable[[], object]) -> None:
        await asyncio.get_running_loop().run_in_executor(None, persist)

    async def sync_topics(self, addr: str) -> None:
        body = await self._fetch(addr, RequestCode.GET_ALL_TOPIC_CONFIG)
        wrapper = TopicConfigSerializeWrapper.from_json(body)
        topics = self.topics
        if wrapper.data_version == topics.data_version:
            return
        with topics.lock:
            topics.table.clear()
            topics.table.update(wrapper.topic_config_table)
            topics.data_version = wrapper.data_version
        await self._persist(topics.persist)
        log.info("slave sync: %d topics from master %s", len(wrapper.topic_config_table), addr)
        self.on_topics_changed()

    async def sync_offsets(self, addr: str) -> None:
        body = await self._fetch(addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
        incoming = ConsumerOffsetTable(self.offsets.path.parent)
        incoming.decode(body.decode("utf-8"))
        with self.offsets.lock:
            self.offsets.offset_table.update(incoming.offset_table)
        await self._persist(self.offsets.persist)

    async def sync_delay_offsets(self, addr: str) -> None:
        text = (await self._fetch(addr, RequestCode.GET_ALL_DELAY_OFFSET)).decode("utf-8")
        DelayOffsetTable(self.delay_path.parent).decode(text)  # validate before writing
        current = self.delay_path.read_text("utf-8") if self.delay_path.exists() else None
        if text != current:
            await self._persist(lambda: write_atomically(self.delay_path, text))

    async def sync_groups(self, addr: str) -> None:
        body = await self._fetch(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        data = fastjson.loads(body)
        if not isinstance(data, dict):
            raise ValueError("subscription groups: expected a JSON object")
        raw_version = data.get("dataVersion")
        version = DataVersion.from_json_obj(raw_version) if isinstance(raw_version, dict) else DataVersion()
        groups = self.groups
        if version == groups.data_version:
            return
        table = {
            str(name): SubscriptionGroupConfig.from_json_obj(obj)
            for name, obj in (data.get("subscriptionGroupTable") or {}).items()
        }
        with groups.lock:
            groups.table.clear()
            groups.table.update(table)
            groups.data_version = version
        await self._persist(groups.persist)
        log.info("slave sync: %d subscription groups from master %s", len(table), addr)


class TopicLearner:
    """Dispatch listener of a slave: make sure every replicated queue has a topic config."""

    def __init__(self, topics: TopicConfigManager, default_queue_nums: int) -> None:
        self.topics = topics
        self.default_queue_nums = default_queue_nums

    def __call__(self, topic: str, queue_id: int, max_offset: int, tags_code: int, ts: int) -> None:
        del max_offset, tags_code, ts
        tc = self.topics.select(topic)
        if tc is not None and queue_id < tc.read_queue_nums:
            return
        if tc is None:
            n = max(self.default_queue_nums, queue_id + 1)
            tc = TopicConfig(topic, n, n, perm.PERM_READ | perm.PERM_WRITE)
        else:
            queues = queue_id + 1
            write = max(tc.write_queue_nums, queues)
            tc = dataclasses.replace(tc, read_queue_nums=queues, write_queue_nums=write)
        log.info("slave: topic %s learned from the replicated log (%d queues)", topic, tc.read_queue_nums)
        self.topics.update(tc)
