"""The decoder's `mix` hook and the per-group settings its implementations look up.

A mix turns a group's stream log-probs into the group's logits: CID mixes a with-context and a
without-context stream, DP-ICL aggregates k + 1 document streams, PAD adds each group's noise to
its one stream. One decode call can sweep settings across groups, so each mix keeps its settings
as per-group columns (`GroupSettings`) and reads the rows of the groups a step decodes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import torch

Mix = Callable[[torch.Tensor, torch.Tensor, int], tuple[torch.Tensor, dict[str, torch.Tensor]]]
"""(stream log-probs [g, S, V], the g groups' indices [g] into the call's groups, step) ->
(group logits [g, V], per-step records {name: [g] tensor}). The decoder may pass any subset of
groups (chunks, finished groups removed), so a mix looks its per-group settings up by index."""


def one_or_per_group(value: Sequence | int | float) -> list:
    """A setting given as one number (every group's) or as one value per group, as a list."""
    return [value] if isinstance(value, int | float) else list(value)


class GroupSettings:
    """A mix's per-group settings, on the host and copied once to each device that asks.

    columns: {name: [G, ...] tensor}, one row per group of the decode call; a column of one row
    [1, ...] is one value that every group shares."""

    def __init__(self, columns: Mapping[str, torch.Tensor]):
        self.columns = dict(columns)
        self._devices: dict[torch.device, dict[str, torch.Tensor]] = {}

    def on(self, device: torch.device) -> dict[str, torch.Tensor]:
        """Every column on `device`, {name: [G, ...] or [1, ...]}."""
        # One copy per device, not one per step: a host-to-device copy every step would make
        # each decoding step wait for the previous one to finish on the GPU.
        if device not in self._devices:
            self._devices[device] = {name: v.to(device) for name, v in self.columns.items()}
        return self._devices[device]

    def rows(self, name: str, groups: torch.Tensor) -> torch.Tensor:
        """[g, ...] column `name` of the groups [g] (indices into the call's G), on their device."""
        values = self.on(groups.device)[name]
        if len(values) == 1:
            return values.expand(len(groups), *values.shape[1:])
        return values[groups]
