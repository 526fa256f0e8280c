"""The padding-index check: an embedding's padding_idx counted where the batch key it reads cannot be padding."""

from __future__ import annotations

import torch

from framework.debug.padding_index import _real_occurrences


def test_one_id_per_sequence_is_never_padding():
    assert _real_occurrences(torch.tensor([0, 3, 0, 1]), 0, None) == (2, 4)


def test_variable_length_keys_count_only_the_real_frames():
    ids = torch.tensor([[5, 0, 2, 0], [4, 1, 0, 0]])  # the second row's last two frames are padding
    assert _real_occurrences(ids, 0, torch.tensor([4, 2])) == (2, 6)
    assert _real_occurrences(ids, 0, torch.tensor([2, 2])) == (1, 4)


def test_keys_stored_padded_count_a_pad_id_only_when_a_real_id_follows_it():
    trailing = torch.tensor([[5, 2, 0, 0], [4, 1, 3, 0]])
    assert _real_occurrences(trailing, 0, None) == (0, 5)
    inside = torch.tensor([[5, 0, 2, 0], [0, 1, 3, 0]])
    assert _real_occurrences(inside, 0, None) == (2, 6)
