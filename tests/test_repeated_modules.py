"""The repeated-modules check: a container that lists one module object at several entries."""

from __future__ import annotations

from torch import nn

from framework.debug.repeated_modules import repeated_entries


def test_list_multiplication_repeats_one_object():
    block = nn.Linear(4, 4)
    assert list(repeated_entries(nn.ModuleList([block] * 3)).values()) == [["0", "1", "2"]]
    assert list(repeated_entries(nn.Sequential(nn.Linear(2, 4), block, nn.ReLU(), block)).values()) == [["1", "3"]]


def test_distinct_blocks_parameterless_repeats_and_sharing_by_a_loop_are_not_reported():
    assert repeated_entries(nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])) == {}
    relu = nn.ReLU()
    assert repeated_entries(nn.Sequential(nn.Linear(4, 4), relu, nn.Linear(4, 4), relu)) == {}
    shared = nn.ModuleDict({"layer": nn.Linear(4, 4)})  # one layer applied n times in forward
    assert repeated_entries(shared) == {}
