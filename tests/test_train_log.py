"""What s3_train's log says each model's training spent."""

from __future__ import annotations

import math

import pandas as pd

from privleak.training.train_log import dp_steps


def test_dp_steps_count_private_all_jft_after_its_first_phase_and_the_schedules_own():
    log = pd.DataFrame(
        {
            "model": ["public", "private", "pub_redacted-k", "jft-k", "schedule-k", "doc-k"],
            "kind": ["adamw", "dp", "adamw", "jft", "schedule", "schedule"],
            "steps": [38, 57, 38, 57, 150, 38],
            "after": [None, None, None, "pub_redacted-k", None, None],
            "dp_steps": [math.nan, math.nan, math.nan, math.nan, 29.0, math.nan],
        }
    )
    assert dp_steps(log).tolist() == [0, 57, 0, 19, 29, 0]
