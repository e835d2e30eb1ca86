"""The committed S3 run trains in the regime where the paper's trade-off can show: the
Redaction Schedule takes a real DP phase at the official clip, in every training run."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
MIN_DP_STEPS = 24


def test_every_embedded_schedule_run_takes_dozens_of_dp_steps_at_the_official_clip():
    params = yaml.safe_load((ROOT / "params.yaml").read_text())["s3"]["embedded"]
    assert params["dp"]["max_grad_norm"] == 0.1  # every official DP run clips at 0.1
    targets = json.loads((ROOT / "metrics" / "s3.json").read_text())["targets"]
    for policy, by_target in targets.items():
        steps = by_target["Redaction Schedule"]["dp_steps"]
        assert len(steps) == params["seeds"], policy
        assert min(steps) >= MIN_DP_STEPS, (policy, steps)
