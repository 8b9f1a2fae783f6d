"""A real broker on 127.0.0.1 (free ports, temp store) and a raw remoting client, for broker tests.

Async tests run their scenario with `tests.support.aio.run`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from rocketlite.broker.config import BrokerConfig
from rocketlite.broker.controller import BrokerController
from rocketlite.protocol.codes import ResponseCode
from rocketlite.protocol.message import string_to_properties
from rocketlite.protocol.wire.command import RemotingCommand, make_request
from rocketlite.remoting.client import RemotingClient
from rocketlite.store.config import StoreConfig
from tests.support.wire import pull_until_end, send_command

T = TypeVar("T")


@dataclass
class BrokerUnderTest:
    controller: BrokerController
    client: RemotingClient

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.controller.port}"

    async def call(self, code: int, ext: dict[str, str] | None = None, body: bytes | None = None,
                   timeout: float = 5.0) -> RemotingCommand:  # fmt: skip
        return await self.client.invoke(self.addr, make_request(code, ext or {}, body), timeout)

    async def send(self, topic: str, body: bytes = b"hello", *, queue_id: int = 0, tags: str | None = None,
                   keys: str | None = None, props: dict[str, str] | None = None,
                   reconsume_times: int = 0) -> RemotingCommand:  # fmt: skip
        request = send_command(topic, body, queue_id=queue_id, group="test_pg", tags=tags, keys=keys,
                               props=props, reconsume_times=reconsume_times, born_timestamp=1)  # fmt: skip
        response = await self.client.invoke(self.addr, request, 5.0)
        if response.code == ResponseCode.SUCCESS:
            await self.dispatched()
        return response

    async def dispatched(self) -> None:
        """Wait until everything stored so far is in the consume queues and the index, so the
        next pull or query sees it (dispatch runs on its own thread, after the send's answer)."""
        assert await asyncio.to_thread(self.controller.store.wait_dispatched, 10.0)


@contextlib.asynccontextmanager
async def broker_under_test(root: Path, **broker_overrides: Any) -> AsyncIterator[BrokerUnderTest]:
    """Start a broker with a small store under `root`; store keys may be given as `store_<key>`."""
    store_kw = {k[len("store_") :]: v for k, v in broker_overrides.items() if k.startswith("store_")}
    broker_kw = {k: v for k, v in broker_overrides.items() if not k.startswith("store_")}
    store_cfg = StoreConfig(
        store_path_root_dir=root,
        maped_file_size_commit_log=store_kw.pop("maped_file_size_commit_log", 1 << 20),
        maped_file_size_consume_queue=store_kw.pop("maped_file_size_consume_queue", 1000 * 20),
        max_hash_slot_num=store_kw.pop("max_hash_slot_num", 1000),
        max_index_num=store_kw.pop("max_index_num", 4000),
        **store_kw,
    )
    controller = BrokerController(BrokerConfig(**{"listen_port": 0, **broker_kw}), store_cfg)
    await controller.start()
    client = RemotingClient()
    try:
        yield BrokerUnderTest(controller, client)
    finally:
        await client.close()
        await controller.close()


async def stored_by_uniq_key(
    broker: BrokerUnderTest, topic: str, group: str = "g"
) -> dict[str, tuple[bytes, dict[str, str]]]:
    """Every message of `topic` pulled back from each queue, by its UNIQ_KEY (the id a producer
    was given): (body, properties). How the 5.x client tests check what was stored."""
    await broker.dispatched()
    tc = broker.controller.topics.select(topic)
    assert tc is not None, f"topic {topic} was not created"
    stored: dict[str, tuple[bytes, dict[str, str]]] = {}
    for queue_id in range(tc.read_queue_nums):
        records, _ = await pull_until_end(broker.client, broker.addr, topic, queue_id, group=group)
        for r in records:
            props = string_to_properties(r.properties_string)
            stored[props.get("UNIQ_KEY", "")] = (r.body, props)
    return stored
