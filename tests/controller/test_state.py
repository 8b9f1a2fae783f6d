"""The controller's pure parts: the epoch file layout and truncation rule, and the election rule."""

from __future__ import annotations

import pytest

from rocketlite.controller.state import AliveBroker, ElectionRefused, GroupState, alter_sync_state_set, elect
from rocketlite.protocol.errors import ProtocolError
from rocketlite.protocol.formats.epoch_file import EpochEntry, append_epoch, consistent_end, decode, encode

E = EpochEntry


def test_epoch_file_is_rocketmqs_checkpoint_layout() -> None:
    # RocketMQ's CheckpointFile example: 2 entries, crc 773307083.
    text = encode([E(7, 7000), E(8, 8000)])
    assert text == "2\n773307083\n7-7000\n8-8000\n"
    assert decode(text) == [E(7, 7000), E(8, 8000)]
    with pytest.raises(ProtocolError, match="crc32"):
        decode("2\n1\n7-7000\n8-8000\n")
    with pytest.raises(ProtocolError, match="expected 3 entries"):
        decode("3\n0\n7-7000\n8-8000\n")


def test_a_deposed_masters_tail_is_cut_at_the_new_epochs_start() -> None:
    # old master wrote epoch 1 up to 1000; the new master took over at 800 (epoch 2)
    assert consistent_end([E(1, 0)], 1000, [E(1, 0), E(2, 800)], 900) == 800
    # a replica that never saw epoch 1's tail keeps everything it has
    assert consistent_end([E(1, 0)], 700, [E(1, 0), E(2, 800)], 900) == 700
    # diverged epochs (2 started elsewhere on each side): back to the shared epoch 1's end
    assert consistent_end([E(1, 0), E(2, 800)], 850, [E(1, 0), E(3, 800)], 900) == 800
    # nothing shared: everything goes
    assert consistent_end([], 500, [E(1, 0)], 900) == 0
    assert append_epoch([E(1, 0), E(3, 900)], 2, 800) == [E(1, 0), E(2, 800)]


def _alive(*ids: int, offsets: dict[int, int] | None = None) -> dict[int, AliveBroker]:
    return {i: AliveBroker(i, f"127.0.0.1:{10000 + i}", "", 1, (offsets or {}).get(i, 0)) for i in ids}


def test_election_picks_the_live_in_sync_replica_with_the_longest_log() -> None:
    state = GroupState("c", "b", master_broker_id=1, master_epoch=3, sync_state_set=frozenset({1, 2, 3}),
                       sync_state_set_epoch=4)  # fmt: skip
    new = elect(state, _alive(2, 3, offsets={2: 100, 3: 200}))
    assert (new.master_broker_id, new.master_epoch, new.sync_state_set, new.sync_state_set_epoch) == (
        3, 4, frozenset({3}), 5,
    )  # fmt: skip
    with pytest.raises(ElectionRefused, match="alive"):
        elect(state, _alive(1, 2))  # the master lives
    with pytest.raises(ElectionRefused, match="SyncStateSet"):
        elect(GroupState("c", "b", 1, 3, frozenset({1}), 1), _alive(2, 3))
    assert elect(GroupState("c", "b", 1, 3, frozenset({1}), 1), _alive(2), unclean=True).master_broker_id == 2
    with pytest.raises(ElectionRefused, match="not in the SyncStateSet"):
        elect(GroupState("c", "b", 1, 3, frozenset({1, 2}), 1), _alive(1, 2, 3), designated=3)


def test_sync_state_set_changes_are_fenced_by_both_epochs() -> None:
    state = GroupState("c", "b", 1, 3, frozenset({1, 2}), 7)
    new = alter_sync_state_set(state, _alive(1, 2, 3), master_broker_id=1, master_epoch=3,
                               new_set=frozenset({1, 2, 3}), sync_state_set_epoch=7)  # fmt: skip
    assert new.sync_state_set == frozenset({1, 2, 3}) and new.sync_state_set_epoch == 8
    with pytest.raises(ElectionRefused, match="fenced"):
        alter_sync_state_set(state, _alive(1, 2), master_broker_id=1, master_epoch=2,
                             new_set=frozenset({1}), sync_state_set_epoch=7)  # fmt: skip
    with pytest.raises(ElectionRefused, match="fenced"):
        alter_sync_state_set(state, _alive(1, 2), master_broker_id=1, master_epoch=3,
                             new_set=frozenset({1}), sync_state_set_epoch=6)  # fmt: skip
    with pytest.raises(ElectionRefused, match="not alive"):
        alter_sync_state_set(state, _alive(1, 2), master_broker_id=1, master_epoch=3,
                             new_set=frozenset({1, 2, 3}), sync_state_set_epoch=7)  # fmt: skip
