"""The benchmarks' timing protocol (`benchmarks/common.sampled`): each path's best and spread over
several samples, each sample long enough to outlast the timer's and the launch's noise."""

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from common import Timing, sampled  # noqa: E402


class FakeClock:
    """A clock that only `work` moves: each call of the path costs the next scripted duration."""

    def __init__(self, durations):
        self.now, self.durations, self.calls = 0.0, list(durations), 0

    def __call__(self) -> float:
        return self.now

    def work(self) -> int:
        self.now += self.durations[self.calls]
        self.calls += 1
        return self.calls


def test_each_sample_lasts_the_minimum_and_best_and_worst_are_per_call():
    # the first call (0.5 s) does not count; then samples of 4 x 0.25, 8 x 0.125 and 2 x 0.5 s
    clock = FakeClock([0.5] + [0.25] * 4 + [0.125] * 8 + [0.5] * 2)
    result, timing = sampled(clock.work, "cpu", runs=3, min_seconds=1.0, clock=clock)
    assert result == 1  # the first call's result
    assert clock.calls == 1 + 14
    assert timing == Timing(best=0.125, worst=0.5, runs=3, calls=14)
    assert timing.spread == 3.0


def test_a_slow_first_call_does_not_shorten_the_samples():
    # a first call that compiles (8 s) must not make one call a sample
    clock = FakeClock([8.0] + [0.25] * 8)
    _, timing = sampled(clock.work, "cpu", runs=2, min_seconds=1.0, clock=clock)
    assert (timing.calls, timing.best, timing.worst) == (8, 0.25, 0.25)


def test_a_path_longer_than_the_minimum_is_called_once_a_sample():
    clock = FakeClock([2.0, 2.5, 2.0, 2.25, 2.0, 2.125])
    _, timing = sampled(clock.work, "cpu", runs=5, min_seconds=1.0, clock=clock)
    assert (timing.calls, timing.runs) == (5, 5)
    assert (timing.best, timing.worst) == (2.0, 2.5)
    assert "best of 5 samples, 5 calls, spread 25.0%" in str(timing)


def test_min_seconds_zero_times_single_calls():
    clock = FakeClock([0.5, 0.25, 0.75])
    _, timing = sampled(clock.work, "cpu", runs=2, min_seconds=0.0, clock=clock)
    assert (timing.calls, timing.best, timing.worst) == (2, 0.25, 0.75)


@pytest.mark.parametrize(("runs", "min_seconds", "message"), [
    (0, 1.0, "--runs must be >= 1, got 0"),
    (5, -1.0, "--min-seconds must be >= 0, got -1.0"),
])  # fmt: skip
def test_bad_settings_name_the_flag(runs, min_seconds, message):
    with pytest.raises(SystemExit, match=message):
        sampled(lambda: None, "cpu", runs=runs, min_seconds=min_seconds)


def test_the_device_script_names_a_bad_argument(tmp_path):
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "device_check.sh"
    done = subprocess.run(
        ["bash", str(script), "--fast"], capture_output=True, text=True, env={"OUT": str(tmp_path)}
    )
    assert done.returncode == 64
    assert done.stderr.strip() == (
        "device_check.sh: unknown argument '--fast'; allowed: --quick, --dtype bfloat16|float32, "
        "--no-tests"
    )
    assert not any(tmp_path.iterdir())  # nothing written


def test_the_device_script_names_a_bad_dtype(tmp_path):
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "device_check.sh"
    done = subprocess.run(
        ["bash", str(script), "--dtype", "float16"],
        capture_output=True,
        text=True,
        env={"OUT": str(tmp_path)},
    )
    assert done.returncode == 64
    assert (
        done.stderr.strip() == "device_check.sh: --dtype must be bfloat16 or float32, got 'float16'"
    )
    assert not any(tmp_path.iterdir())
