"""Kernels forked from a warm zygote (privleak.pipeline.zygote): the forked process runs the
command's module with the stand-in's arguments, environment and directory, the heavy imports done
and no privleak module left over; its status, signals and death travel through the stand-in.

The stage runner's own tests (test_stage.py) run every notebook through the zygote too."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from privleak.pipeline import zygote
from tests.conftest import gone

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")

PROBE = """\
import json, os, sys
umask = os.umask(0)
json.dump({
    "argv": sys.argv[1:], "cwd": os.getcwd(), "marker": os.environ.get("JPY_MARKER"),
    "preloaded": "torch" in sys.modules, "privleak": "privleak" in sys.modules,
    "parent": os.getppid(), "umask": umask, "cpus": sorted(os.sched_getaffinity(0)),
    "backend": "matplotlib" in sys.modules and sys.modules["matplotlib"].rcParams["backend"],
}, open(os.environ["JPY_OUT"], "w"))
sys.exit(int(os.environ.get("JPY_CODE", "0")))
"""
SLEEPER = """\
import os, pathlib, subprocess, time
# a child that ignores SIGTERM, as a careless tool might: SIGKILL must follow
child = subprocess.Popen(["sh", "-c", "trap '' TERM; sleep 60 & wait"])
pathlib.Path(os.environ["JPY_OUT"]).write_text(f"{child.pid} {os.getpid()}")
time.sleep(60)
"""


# The probes' variables are per kernel (JPY_*, as jupyter_client's own): they do not select the
# zygote, so every run here shares one.


@pytest.fixture(scope="module")
def modules(tmp_path_factory) -> Path:
    """One folder of probe modules for the whole file, so its tests share one zygote, which the
    first stand-in starts (running its own command plainly) and the tests here wait for."""
    folder = tmp_path_factory.mktemp("zygote")
    (folder / "probe.py").write_text(PROBE)
    (folder / "sleeper.py").write_text(SLEEPER)
    env = {**os.environ, "PYTHONPATH": str(folder), "JPY_OUT": str(folder / "first.json")}
    first = subprocess.run(zygote.stand_in([sys.executable, "-m", "probe"]), env=env, timeout=120)
    plain = json.loads((folder / "first.json").read_text())
    assert first.returncode == 0 and not plain["preloaded"]  # no zygote yet: run as before
    deadline = time.monotonic() + 120
    while not zygote.ready(env):
        assert time.monotonic() < deadline, "no zygote came up"
        time.sleep(0.2)
    return folder


def stand_in(
    modules: Path, module: str, *args: str, out: Path, setup=None, **env: str
) -> subprocess.Popen:
    environment = {**os.environ, "PYTHONPATH": str(modules), "JPY_OUT": str(out), **env}
    command = zygote.stand_in([sys.executable, "-m", module, *args])
    return subprocess.Popen(command, cwd=out.parent, env=environment, preexec_fn=setup)


def pids(out: Path, running: subprocess.Popen) -> tuple[int, int]:
    """(child, kernel) pids once the sleeper has written them, while `running` lives."""
    deadline = time.monotonic() + 60
    while not out.exists():
        assert running.poll() is None and time.monotonic() < deadline
        time.sleep(0.1)
    child, kernel = map(int, out.read_text().split())
    return child, kernel


def test_the_fork_runs_the_command_as_a_fresh_kernel_would_with_the_imports_done(modules, tmp_path):
    seen = []
    for run, (marker, code) in enumerate([("first", 3), ("second", 0)]):
        out = tmp_path / f"run{run}" / "probe.json"
        out.parent.mkdir()
        done = stand_in(
            modules, "probe", "-f", marker, out=out, JPY_MARKER=marker, JPY_CODE=str(code)
        )
        assert done.wait(timeout=120) == code
        seen.append(json.loads(out.read_text()))
    for probe, marker, run in zip(seen, ["first", "second"], range(2), strict=True):
        assert probe["argv"] == ["-f", marker]
        assert probe["marker"] == marker  # the stand-in's environment, not the zygote's
        assert probe["cwd"] == str(tmp_path / f"run{run}")
        assert probe["preloaded"] and not probe["privleak"]
        # matplotlib was imported with the backend ipykernel sets in a fresh kernel
        assert probe["backend"] == (os.environ.get("MPLBACKEND") or zygote.INLINE_BACKEND)
    assert seen[0]["parent"] == seen[1]["parent"]  # one zygote forked both


def test_a_directory_with_its_own_matplotlibrc_runs_its_command_itself(modules, tmp_path):
    (tmp_path / "matplotlibrc").write_text("lines.linewidth: 3\n")  # read before any other
    out = tmp_path / "probe.json"
    assert stand_in(modules, "probe", out=out).wait(timeout=120) == 0
    assert not json.loads(out.read_text())["preloaded"]
    elsewhere = tmp_path / "elsewhere" / "probe.json"
    elsewhere.parent.mkdir()
    assert stand_in(modules, "probe", out=elsewhere).wait(timeout=120) == 0
    assert json.loads(elsewhere.read_text())["preloaded"]  # the zygote serves the others


def test_the_fork_takes_the_stand_ins_umask_and_cpus(modules, tmp_path):
    cpus = sorted(os.sched_getaffinity(0))[:1]

    def setup():
        os.umask(0o027)
        os.sched_setaffinity(0, cpus)

    out = tmp_path / "probe.json"
    assert stand_in(modules, "probe", out=out, setup=setup).wait(timeout=120) == 0
    probe = json.loads(out.read_text())
    assert (probe["umask"], probe["cpus"]) == (0o027, cpus)


def test_per_kernel_variables_do_not_select_the_zygote_and_the_others_do():
    per_kernel = ["JPY_PARENT_PID", "DVC_ROOT", "PRIVLEAK_PROFILE", "PYTEST_CURRENT_TEST", "_"]
    assert all(map(zygote._per_kernel, per_kernel))
    assert not any(map(zygote._per_kernel, ["_PYTHON_SYSCONFIGDATA_NAME", "HOME", "OMP_X"]))
    base = {"HOME": "/h", "JPY_PARENT_PID": "1"}
    assert zygote._key(base) == zygote._key({**base, "JPY_PARENT_PID": "2"})
    assert zygote._key(base) != zygote._key({**base, "OMP_NUM_THREADS": "1"})


def test_a_signal_to_the_stand_in_stops_the_kernel_and_its_children(modules, tmp_path):
    out = tmp_path / "pids"
    running = stand_in(modules, "sleeper", out=out)
    child, kernel = pids(out, running)
    running.send_signal(signal.SIGTERM)
    assert running.wait(timeout=30) == -signal.SIGTERM
    assert gone(child) and gone(kernel)


def test_a_killed_stand_in_takes_the_kernel_and_its_children_with_it(modules, tmp_path):
    out = tmp_path / "pids"
    running = stand_in(modules, "sleeper", out=out)
    child, kernel = pids(out, running)
    running.kill()
    running.wait(timeout=30)
    assert gone(child) and gone(kernel)


def test_the_death_of_the_stand_ins_launcher_stops_the_kernel_and_its_children(modules, tmp_path):
    """The stage runner killed outright: its stand-in, as a kernel it started would, stops."""
    out = tmp_path / "pids"
    command = zygote.stand_in([sys.executable, "-m", "sleeper"])
    environment = {**os.environ, "PYTHONPATH": str(modules), "JPY_OUT": str(out)}
    script = f"import subprocess, time; subprocess.Popen({command!r}); time.sleep(120)"
    launcher = subprocess.Popen([sys.executable, "-c", script], cwd=tmp_path, env=environment)
    child, kernel = pids(out, launcher)
    launcher.kill()
    launcher.wait()
    assert gone(child) and gone(kernel)


def test_a_command_that_cannot_be_forked_runs_itself(tmp_path):
    done = subprocess.run(
        zygote.stand_in(["/bin/echo", "as", "is"]), capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout) == (0, "as is\n")


@pytest.mark.parametrize(
    ("env", "on"),
    [({}, True), ({"PRIVLEAK_ZYGOTE": "0"}, False), ({"PRIVLEAK_PROFILE_DIR": "/tmp/p"}, False)],
)
def test_the_zygote_is_off_when_asked_or_while_stages_are_profiled(monkeypatch, env, on):
    for name in ("PRIVLEAK_ZYGOTE", "PRIVLEAK_PROFILE_DIR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert zygote.enabled() is on


def test_a_report_rendered_in_a_fork_is_the_one_rendered_in_process(tmp_path):
    import nbformat

    from privleak.pipeline import report_html

    cell = nbformat.v4.new_code_cell(
        "print(1)", outputs=[nbformat.v4.new_output("stream", text="1")]
    )
    executed = tmp_path / "toy.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), executed)
    command = [
        sys.executable,
        "-m",
        report_html.__name__,
        str(executed),
        str(tmp_path / "toy.html"),
    ]
    done = subprocess.run(zygote.stand_in(command), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "toy.html").read_text() == report_html.render(executed)
