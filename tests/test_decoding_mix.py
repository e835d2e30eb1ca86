"""The per-group settings cache the CID, DP-ICL and PAD mixes share."""

from __future__ import annotations

import torch

from privleak.decoding import GroupSettings
from privleak.decoding.mix import one_or_per_group


def test_one_value_is_every_groups_and_a_list_is_one_per_group():
    assert one_or_per_group(2) == [2]
    assert one_or_per_group(0.5) == [0.5]
    assert one_or_per_group((1.0, 2.0)) == [1.0, 2.0]


def test_rows_index_per_group_columns_and_broadcast_shared_ones():
    settings = GroupSettings(
        {
            "shared": torch.tensor([0.5]),
            "each": torch.tensor([1.0, 2.0, 3.0]),
            "wide": torch.tensor([[1, 2], [3, 4], [5, 6]]),
        }
    )
    groups = torch.tensor([2, 0])
    assert settings.rows("shared", groups).tolist() == [0.5, 0.5]
    assert settings.rows("each", groups).tolist() == [3.0, 1.0]
    assert settings.rows("wide", groups).tolist() == [[5, 6], [1, 2]]


def test_columns_are_copied_to_a_device_once():
    settings = GroupSettings({"each": torch.tensor([1.0, 2.0])})
    device = torch.device("cpu")
    assert settings.on(device) is settings.on(device)
