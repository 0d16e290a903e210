"""Each result-waiter connection LISTENs to its own share of the run-end channels."""

from __future__ import annotations

import uuid

import pytest

from runtime.execution.waiter import shard_index
from runtime.scheduler.store.listener import PROCESS_STATE_CHANNELS, process_state_channels
from tests.support.scheduler import process_state_channel


@pytest.mark.parametrize("shards", [1, 2, 3, 8, 16])
def test_the_shards_split_the_channels_with_no_overlap_and_no_gap(shards: int) -> None:
    heard = [process_state_channels(index, shards) for index in range(shards)]
    flat = [channel for channels in heard for channel in channels]
    assert len(flat) == len(set(flat)) == PROCESS_STATE_CHANNELS


@pytest.mark.parametrize("shards", [1, 3, 8])
def test_a_runs_waiters_sit_on_the_shard_that_hears_its_channel(shards: int) -> None:
    for _ in range(200):
        process_id = str(uuid.uuid4())
        index = shard_index(process_id, shards)
        assert process_state_channel(process_id) in process_state_channels(index, shards)
