"""The stage runner and scripts/stage: every ending leaves the workspace as before, stops the
kernel and its children, and prints one line.

Each test builds a one-stage project in tmp_path from a copy of the real params.yaml and a toy
notebook, and runs it through scripts/stage in a subprocess, as DVC would.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import gone

REPO = Path(__file__).resolve().parents[1]
WRAPPER = REPO / "scripts" / "stage"
OUTS = ["out", "extra", "reports/toy"]
HEAD = """\
# %% tags=["parameters"]
seed = 0
figures = {}

# %%
import json, os, pathlib, subprocess, sys, time
pathlib.Path("out").write_text("partial")
pathlib.Path("extra").write_text("partial")
"""
# Writes "<child> <kernel> <runner>" pids once the child runs, then sleeps for the test's signal.
# The runner is the kernel's launcher (JPY_PARENT_PID), not its parent: kernels are forked by a
# zygote (privleak.pipeline.zygote).
SLEEPS = """\
child = subprocess.Popen(["sleep", "60"])
pathlib.Path("pids.tmp").write_text(f"{child.pid} {os.getpid()} {os.environ['JPY_PARENT_PID']}")
os.replace("pids.tmp", "pids")
time.sleep(60)
"""
RESTORED = "partial outputs removed"


def toy_project(root: Path, body: str) -> dict[str, bytes]:
    """A project whose stage `toy` declares seed, figures and OUTS; `out` and an old report
    exist (as after an earlier run), `extra` does not. Returns those previous outputs."""
    shutil.copy(REPO / "params.yaml", root / "params.yaml")
    stage = {"cmd": "scripts/stage toy", "params": ["seed", "figures"], "outs": OUTS}
    (root / "dvc.yaml").write_text(yaml.safe_dump({"stages": {"toy": stage}}))
    (root / "notebooks").mkdir()
    (root / "notebooks" / "toy.py").write_text(HEAD + textwrap.dedent(body))
    (root / "reports" / "toy").mkdir(parents=True)
    (root / "out").write_bytes(b"previous \x00\xff bytes")
    (root / "reports" / "toy" / "toy.ipynb").write_text("earlier executed notebook")
    return outputs(root)


def outputs(root: Path) -> dict[str, bytes]:
    """Every file under the declared outputs, by path relative to root."""
    files = {}
    for name in OUTS:
        path = root / name
        for file in [path] if path.is_file() else sorted(path.rglob("*")):
            if file.is_file():
                files[str(file.relative_to(root))] = file.read_bytes()
    return files


# One HOME for every test's project (none of the user's config), so their kernels share a zygote.
HOME = Path(tempfile.gettempdir()) / f"privleak-test-home-{os.getuid()}"


def environment(root: Path, **extra: str) -> dict[str, str]:
    """No venv on PATH: scripts/stage must find the interpreter itself."""
    HOME.mkdir(exist_ok=True)
    return {
        "PRIVLEAK_ROOT": str(root),
        "PRIVLEAK_PYTHON": sys.executable,
        "PATH": "/usr/bin:/bin",
        "HOME": str(HOME),
        **extra,
    }


def stage(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [WRAPPER, "toy", *args],
        cwd=root,
        env=environment(root),
        capture_output=True,
        text=True,
        timeout=120,
    )


def wait_for(path: Path, running: subprocess.Popen) -> None:
    """Until the notebook `running` executes has written `path`."""
    deadline = time.monotonic() + 60
    while not path.exists():
        assert running.poll() is None and time.monotonic() < deadline, f"no {path.name} written"
        time.sleep(0.1)


def wait_for_pids(root: Path, running: subprocess.Popen) -> list[int]:
    """(child, kernel, runner) pids, once the notebook has started its child."""
    wait_for(root / "pids", running)
    return [int(pid) for pid in (root / "pids").read_text().split()]


def test_success_writes_outputs_and_reports_and_prints_only_its_timing(tmp_path):
    toy_project(tmp_path, 'pathlib.Path("out").write_text(json.dumps([seed, figures]))\n')
    (tmp_path / "reports" / "failed").mkdir()
    (tmp_path / "reports" / "failed" / "toy.ipynb").write_text("an earlier failure")
    done = stage(tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [done.stderr.strip()]  # no kernel TCP warning
    assert done.stderr.startswith("stage toy: ") and done.stderr.strip().endswith(" s")
    real = yaml.safe_load((REPO / "params.yaml").read_text())
    assert json.loads((tmp_path / "out").read_text()) == [real["seed"], real["figures"]]
    assert (tmp_path / "extra").read_text() == "partial"
    report = (tmp_path / "reports" / "toy" / "toy.ipynb").read_text()
    assert json.loads(report)["cells"] and (tmp_path / "reports" / "toy" / "toy.html").exists()
    assert not (tmp_path / "reports" / "failed" / "toy.ipynb").exists()
    assert not (tmp_path / ".privleak" / "previous" / "toy").exists()
    assert not (tmp_path / "notebooks" / "toy.ipynb").exists()


def test_the_kernel_listens_on_private_unix_sockets_removed_after_the_run(tmp_path):
    """TCP ports picked by one runner can be taken by a stage starting beside it before its
    kernel binds them; Unix sockets in the run's own 0700 directory cannot be."""
    toy_project(
        tmp_path,
        """\
        from ipykernel.connect import get_connection_info
        info = get_connection_info(unpack=True)
        socket_dir = os.path.dirname(info["ip"])
        mode = os.stat(socket_dir).st_mode & 0o777
        pathlib.Path("out").write_text(json.dumps([info["transport"], socket_dir, mode]))
        """,
    )
    done = stage(tmp_path)
    assert done.returncode == 0, done.stderr
    transport, socket_dir, mode = json.loads((tmp_path / "out").read_text())
    assert (transport, mode) == ("ipc", 0o700)
    assert not Path(socket_dir).exists()


def test_cell_error_is_one_line_pointing_at_the_kept_notebook_and_restores(tmp_path):
    before = toy_project(
        tmp_path,
        """\
        from privleak.errors import PrivleakError
        raise PrivleakError("toy.n must be >= 5, got 2\\nsecond line")
        """,
    )
    done = stage(tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        "privleak: error: stage 'toy' failed: PrivleakError: toy.n must be >= 5, got 2"
        " (see reports/failed/toy.ipynb)\n"
    )
    assert "toy.n must be >= 5" in (tmp_path / "reports" / "failed" / "toy.ipynb").read_text()
    assert outputs(tmp_path) == before
    assert not (tmp_path / "extra").exists()
    assert not (tmp_path / ".privleak" / "previous" / "toy").exists()


def test_dead_kernel_is_one_line_and_restores(tmp_path):
    before = toy_project(tmp_path, "os.kill(os.getpid(), 9)\n")
    done = stage(tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        "privleak: error: stage 'toy' failed: DeadKernelError: Kernel died"
        " (see reports/failed/toy.ipynb)\n"
    )
    assert outputs(tmp_path) == before


# Written on the kernel process's own fd 2, as libzmq's teardown assertions are. A cell's
# sys.stderr.fileno() is that fd (ipykernel keeps it for subprocesses): written from a cell, the
# line does not depend on the kernel living through its teardown, which the runner cuts short.
KERNEL_NOISE = """\
import sys
os.write(sys.stderr.fileno(), b"Assertion failed: kernel noise\\n")
"""


@pytest.mark.parametrize("ending", ["", "raise ValueError('bad cell')\n"])
def test_the_kernels_own_stderr_goes_to_its_log_not_the_runners_line(tmp_path, ending):
    toy_project(tmp_path, KERNEL_NOISE + ending)
    done = stage(tmp_path)
    assert "kernel noise" not in done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.returncode == (2 if ending else 0)
    assert "kernel noise" in (tmp_path / ".privleak" / "kernels" / "toy.log").read_text()


def test_cell_timeout_is_one_line_and_stops_the_kernel(tmp_path):
    before = toy_project(tmp_path, SLEEPS)
    done = stage(tmp_path, "--timeout", "1")
    assert done.returncode == 2
    assert done.stderr == (
        "privleak: error: stage 'toy' failed: CellTimeoutError: A cell timed out while it was"
        " being executed, after 1 seconds. (see reports/failed/toy.ipynb)\n"
    )
    assert outputs(tmp_path) == before
    child, kernel, _ = [int(pid) for pid in (tmp_path / "pids").read_text().split()]
    assert gone(child) and gone(kernel)


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_signal_stops_kernel_and_children_and_restores(tmp_path, name):
    before = toy_project(tmp_path, SLEEPS)
    running = subprocess.Popen(
        [WRAPPER, "toy"], cwd=tmp_path, env=environment(tmp_path), stderr=subprocess.PIPE, text=True
    )
    child, kernel, runner = wait_for_pids(tmp_path, running)
    assert runner == running.pid  # scripts/stage execs: DVC's child is the runner itself
    assert (tmp_path / "out").read_text() == "partial"
    running.send_signal(signal.Signals[name])
    _, stderr = running.communicate(timeout=30)
    assert running.returncode == 128 + signal.Signals[name]
    assert stderr == f"privleak: error: stage 'toy' interrupted ({name}); {RESTORED}\n"
    assert outputs(tmp_path) == before
    assert not (tmp_path / "extra").exists()
    assert not (tmp_path / "reports" / "failed" / "toy.ipynb").exists()
    assert gone(child) and gone(kernel)


@pytest.mark.parametrize(
    "launch", [["{wrapper}", "toy"], ["sh", "-c", "{wrapper} toy"]], ids=["direct", "sh -c"]
)
def test_death_of_the_launcher_stops_the_stage(tmp_path, launch):
    """A launcher (DVC) killed outright: the runner is its child, or a `sh -c` shell's (dash
    forks the command and outlives the launcher)."""
    before = toy_project(tmp_path, SLEEPS)
    command = [part.format(wrapper=WRAPPER) for part in launch]
    script = f"import subprocess; subprocess.Popen({command!r}).wait()"
    with open(tmp_path / "stderr.txt", "w") as stderr:
        launcher = subprocess.Popen(
            [sys.executable, "-c", script], cwd=tmp_path, env=environment(tmp_path), stderr=stderr
        )
        child, kernel, runner = wait_for_pids(tmp_path, launcher)
        launcher.kill()
        launcher.wait()
    assert gone(runner, within=15) and gone(child) and gone(kernel)
    assert outputs(tmp_path) == before
    assert (tmp_path / "stderr.txt").read_text() == (
        f"privleak: error: stage 'toy' interrupted (SIGTERM); {RESTORED}\n"
    )


def test_outputs_left_aside_by_a_killed_run_are_kept_over_its_partial_ones(tmp_path):
    toy_project(tmp_path, 'raise ValueError("boom")\n')
    aside = tmp_path / ".privleak" / "previous" / "toy"
    aside.mkdir(parents=True)
    (aside / "out").write_text("last good")
    (tmp_path / "out").write_text("written by a run that was SIGKILLed")
    done = stage(tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines()[0].startswith("privleak: warning: stage 'toy':")
    assert done.stderr.splitlines()[1].startswith("privleak: error: stage 'toy' failed: Value")
    assert (tmp_path / "out").read_text() == "last good"
    assert not aside.exists()


def test_bad_stage_name_is_one_line_and_touches_nothing(tmp_path):
    before = toy_project(tmp_path, "")
    done = subprocess.run(
        [WRAPPER, "nope"], cwd=tmp_path, env=environment(tmp_path), capture_output=True, text=True
    )
    assert done.returncode == 2
    assert done.stderr == "privleak: error: dvc.yaml has no stage 'nope'; stages: toy\n"
    assert outputs(tmp_path) == before


FAKE_PYTHON = '#!/bin/sh\necho "{name} $$ $PYTHONPATH $*" > "$MARKER"\n'


@pytest.mark.parametrize("chosen", ["PRIVLEAK_PYTHON", "venv", "python3"])
def test_wrapper_picks_the_interpreter_without_the_callers_path(tmp_path, chosen):
    """$PRIVLEAK_PYTHON, else <checkout>/.venv/bin/python, else python3; exec'd through
    scripts/python, so its pid is the wrapper's."""
    checkout, bin_dir = tmp_path / "checkout", tmp_path / "bin"
    (checkout / "scripts").mkdir(parents=True)
    for script in ("stage", "python"):  # scripts/stage execs scripts/python
        shutil.copy(WRAPPER.parent / script, checkout / "scripts" / script)
    fakes = {"venv": checkout / ".venv" / "bin" / "python", "python3": bin_dir / "python3"}
    fakes["PRIVLEAK_PYTHON"] = tmp_path / "chosen-python"
    for name, fake in fakes.items():
        if name != "venv" or chosen != "python3":
            fake.parent.mkdir(parents=True, exist_ok=True)
            fake.write_text(FAKE_PYTHON.format(name=name))
            fake.chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "MARKER": str(tmp_path / "marker")}
    if chosen == "PRIVLEAK_PYTHON":
        env["PRIVLEAK_PYTHON"] = str(fakes["PRIVLEAK_PYTHON"])
    wrapper = subprocess.Popen(
        [checkout / "scripts" / "stage", "toy", "--profile", "smoke"], env=env
    )
    assert wrapper.wait(timeout=30) == 0
    name, pid, pythonpath, *args = (tmp_path / "marker").read_text().split()
    assert (name, int(pid)) == (chosen, wrapper.pid)
    assert pythonpath == str(checkout / "lib")
    assert args == ["-m", "privleak.pipeline.stage", "toy", "--profile", "smoke"]


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_repro_forwards_args_and_lab_allows_root():
    def dry_run(*args: str) -> str:
        env = os.environ | {"VENV": str(REPO / ".venv-none")}
        done = subprocess.run(
            ["make", "-n", "-o", str(REPO / ".venv-none" / ".installed"), *args],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "dvc repro -s s0_text" in dry_run("repro", "ARGS=-s s0_text")
    lab = dry_run("lab")
    assert ("--allow-root" in lab) == (os.getuid() == 0)


def test_a_second_run_of_the_stage_refuses_with_one_line_and_touches_nothing(tmp_path):
    from filelock import FileLock

    before = toy_project(tmp_path, "")
    with FileLock(tmp_path / ".privleak" / "locks" / "toy.lock"):  # a first run, still going
        done = stage(tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        "privleak: error: stage 'toy' is already running (another run holds "
        ".privleak/locks/toy.lock); wait for it to end, then run again\n"
    )
    assert outputs(tmp_path) == before


def test_a_notebook_that_skips_a_declared_output_fails_and_restores(tmp_path):
    before = toy_project(tmp_path, 'pathlib.Path("extra").unlink()\n')
    done = stage(tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        "privleak: error: stage 'toy' failed: PrivleakError: the notebook ended without writing "
        "the declared output extra\n"
    )
    assert outputs(tmp_path) == before


@pytest.mark.parametrize("second_by", ["dvc", "hand"])
def test_a_run_overlapped_by_a_refused_dvc_run_restores_its_previous_outputs(tmp_path, second_by):
    """A `dvc repro` that reaches a running stage removes its outputs, then its runner is
    refused: the first run cannot trust what it wrote, so it ends as a failure and puts the
    outputs it had set aside back. A second run by hand removes nothing: the first one succeeds."""
    before = toy_project(
        tmp_path,
        """\
        pathlib.Path("started").touch()
        while not pathlib.Path("go").exists():
            time.sleep(0.05)
        pathlib.Path("out").write_text("new")
        """,
    )
    first = subprocess.Popen(
        [WRAPPER, "toy"], cwd=tmp_path, env=environment(tmp_path), stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    wait_for(tmp_path / "started", first)
    launcher = {"DVC_STAGE": "toy"} if second_by == "dvc" else {}
    second = subprocess.run(
        [WRAPPER, "toy"], cwd=tmp_path, env=environment(tmp_path, **launcher),
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert second.returncode == 2 and "is already running" in second.stderr
    (tmp_path / "go").touch()
    if second_by == "hand":
        assert first.wait(timeout=60) == 0, first.stderr.read()
        assert (tmp_path / "out").read_text() == "new"
        return
    assert first.wait(timeout=60) == 2
    assert first.stderr.read() == (
        "privleak: error: stage 'toy' failed: PrivleakError: another run of the stage was "
        "refused while this one ran, and a `dvc repro` that starts one removes the stage's "
        "outputs first: this run's may be incomplete, so the previous outputs are back; run it "
        "again\n"
    )
    assert outputs(tmp_path) == before
    rerun = stage(tmp_path)  # the refusal's mark is for the run it overlapped only
    assert rerun.returncode == 0, rerun.stderr
    assert (tmp_path / "out").read_text() == "new"
