"""Run one dvc.yaml stage's notebook: `python -m privleak.pipeline.stage <stage>`
(or `scripts/stage`).

The notebook is notebooks/<stage>.py (jupytext py:percent). It receives only the params the stage
declares, injected by papermill after its `parameters` cell. The executed copy is written to
reports/<stage>/<stage>.ipynb and .html, never over the source.

A run is all or nothing. The stage's existing declared outputs are moved aside to
.privleak/previous/<stage>/ first (DVC has usually removed them already; a manual run has not).
Success deletes the moved-aside copies. Any other ending removes what the run wrote and moves the
previous outputs back, so the workspace is exactly as before; the kernel and every process it
started are stopped. Every ending but success prints one line on stderr:

- a cell raised, the kernel died, a cell ran past --timeout, or the kernel failed to start:
  `privleak: error: stage 's' failed: <Error>: <first line> (see reports/failed/s.ipynb)`,
  exit 2; the executed notebook is kept at reports/failed/<stage>.ipynb, outside every output.
  The kernel's own stdout and stderr (outside cells: startup, teardown) go to
  .privleak/kernels/<stage>.log.
- SIGINT (Ctrl-C), SIGTERM or SIGHUP, or the death of the process that launched the runner
  (handled as SIGTERM): `privleak: error: stage 's' interrupted (SIGINT); partial outputs
  removed`, exit 128 + the signal number (130 SIGINT, 143 SIGTERM, 129 SIGHUP), as shells do.
- bad params or stage name: the PrivleakError's line, exit 2.
- another run of the same stage holds its lock (.privleak/locks/<stage>.lock):
  `privleak: error: stage 's' is already running ...`, exit 2, nothing touched.

`dvc repro` deletes a stage's outputs before it starts the runner. After any failure of a run
that DVC launched (DVC_STAGE is set), except a refusal, the recorded outputs that are missing
(those in dvc.lock) come back from the DVC cache or git (privleak.pipeline.recorded), so the
workspace holds what dvc.lock records and `dvc status` shows the stage changed only in what the
user edited. A `dvc repro` refused while a manual run of the stage runs has removed that run's
outputs: it marks the run, which then ends as a failure and puts its set-aside outputs back.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import yaml
from filelock import FileLock, Timeout

from privleak.errors import PrivleakError, require
from privleak.pipeline import checkpoint, paths, recorded, report_html, zygote
from privleak.pipeline import params as params_module

# jsonschema, which nbformat imports, loads rfc3987_syntax when it is installed and that package
# builds its URI grammar at import: about 1.8 s of every stage run, for a string format no
# notebook schema uses. A None entry makes jsonschema's optional import of it fail fast.
sys.modules.setdefault("rfc3987_syntax", None)

EXIT_ERROR = 2
_ENDING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_PR_SET_PDEATHSIG = 1  # linux/prctl.h
_SHELLS = {"sh", "dash", "bash", "zsh", "ksh"}
_POLL_S = 0.5
_STOP_GRACE_S = 3.0
_WORKER_GRACE_S = 10.0


class Interrupted(BaseException):
    """A signal ended the run. A BaseException, so no `except Exception` in papermill, nbclient
    or jupyter_client can swallow it."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class _Signals:
    """SIGINT, SIGTERM and SIGHUP raise Interrupted in the main thread, but only inside
    `armed()`; outside it (moving outputs, cleaning up) the first one is remembered and raised
    when next armed, so no move of outputs stops half-way."""

    def __init__(self) -> None:
        self.received: int | None = None
        self._armed = False

    def install(self) -> None:
        for signum in _ENDING_SIGNALS:
            signal.signal(signum, self._handle)

    def _handle(self, signum: int, frame) -> None:
        self.received = self.received or signum
        if self._armed:
            self._armed = False
            raise Interrupted(self.received)

    @contextlib.contextmanager
    def armed(self):
        self._armed = True
        try:
            self._raise_received()
            yield
            self._raise_received()  # a library swallowed the Interrupted
        finally:
            self._armed = False

    def _raise_received(self) -> None:
        if self.received is not None:
            raise Interrupted(self.received)


_SIGNALS = _Signals()


def _launchers() -> list[psutil.Process]:
    """The runner's parent and, while that is a `sh -c` shell, the shell's parent too: dash forks
    a `-c` command instead of exec'ing it, so when DVC dies its shell lives on, waiting for us."""
    launchers = [psutil.Process().parent()]
    with contextlib.suppress(psutil.Error):
        while launchers[-1] is not None and (
            launchers[-1].name() in _SHELLS and "-c" in launchers[-1].cmdline()
        ):
            launchers.append(launchers[-1].parent())
    return [process for process in launchers if process is not None]


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _watch_launchers() -> None:
    """Turn the death of whatever launched the runner into SIGTERM to the runner, so a killed
    DVC leaves no orphan stage behind: prctl(PR_SET_PDEATHSIG) on Linux, plus a daemon thread
    that notices reparenting (any OS, and launchers above a `sh -c` shell)."""
    with contextlib.suppress(OSError, AttributeError):  # no prctl off Linux
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    parent_pid, launchers = os.getppid(), _launchers()

    def poll() -> None:
        while os.getppid() == parent_pid and all(_alive(p) for p in launchers):
            time.sleep(_POLL_S)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=poll, name="privleak-launcher-watch", daemon=True).start()


def _stop_descendants() -> None:
    """Terminate the kernel and everything it started; kill what outlives the grace period."""
    descendants = psutil.Process().children(recursive=True)
    for process in descendants:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.terminate()
    _, alive = psutil.wait_procs(descendants, timeout=_STOP_GRACE_S)
    for process in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(alive, timeout=_STOP_GRACE_S)


def _exists(path: Path) -> bool:
    return path.is_symlink() or path.exists()


class _Outputs:
    """A stage's declared outputs, set aside under .privleak/previous/<stage>/ (same tree, so a
    rename) before the run, then dropped after a success or moved back after any failure."""

    def __init__(self, stage: str, outputs: list[Path]):
        self.stage = stage
        self.outputs = outputs
        self.aside = paths.ROOT / ".privleak" / "previous" / stage

    def _kept(self, output: Path) -> Path:
        return self.aside / output.relative_to(paths.ROOT)

    def set_aside(self) -> None:
        """Move existing outputs aside. A copy already there was left by a run that was killed
        outright (SIGKILL): it is the last good output, and the one in place that run's partial
        output, so the copy stays and the partial output goes."""
        for output in self.outputs:
            kept = self._kept(output)
            if _exists(kept):
                _say(
                    f"privleak: warning: stage '{self.stage}': {_shown(kept)} was left by a killed"
                    " run; keeping it as the previous output"
                )
                paths.remove(output)
            elif _exists(output):
                kept.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(output, kept)

    def drop(self) -> None:
        paths.remove(self.aside)

    def restore(self, started: bool) -> None:
        """Put every set-aside output back; remove the others too if the notebook started."""
        for output in self.outputs:
            kept = self._kept(output)
            if started or _exists(kept):
                paths.remove(output)
            if _exists(kept):
                output.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(kept, output)
        paths.remove(self.aside)


def _shown(path: Path) -> str:
    """`path` relative to the project root where it is inside it."""
    return str(path.relative_to(paths.ROOT)) if paths.ROOT in path.parents else str(path)


def _say(line: str) -> None:
    """One line on stderr, which may be a pipe whose reader (a killed DVC) is gone."""
    with contextlib.suppress(OSError):
        print(line, file=sys.stderr, flush=True)


class _QuietNbclient(logging.Filter):
    """Drops nbclient's log lines ("Kernel died while waiting for execute reply.", "Timeout
    waiting for execute reply"): each announces a failure that it then raises, and the runner
    reports that failure in its one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "nbclient" not in Path(record.pathname).parts


class _QuietTeardown(logging.Filter):
    """Drops asyncio's "Task was destroyed but it is pending!" for nbclient's output poll, left
    pending when a timed-out or dead kernel ends the run: the failure is the runner's one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Task was destroyed but it is pending")


def kernel_log(stage: str) -> Path:
    """Where the stage's kernel writes its own stdout and stderr (privleak.pipeline.kernel)."""
    return paths.ROOT / ".privleak" / "kernels" / f"{stage}.log"


def _kernel_config(log: Path, sockets: str):
    """nbclient's config: the logged kernel manager, talking to its kernel over Unix sockets in
    the directory `sockets`.

    Over TCP the runner picks five free ports and releases them before its kernel binds them; a
    stage starting beside it (a dvc exp queue, a parallel test) can take one in between, and its
    kernel dies before replying to kernel_info. Sockets in a directory of this run's own cannot
    collide, and only this user can open them (mkdtemp's mode is 0700), so they need no
    CurveZMQ encryption and ipykernel logs no warning about its absence, as it does over TCP.
    """
    from traitlets.config import Config

    return Config(
        {
            "NotebookClient": {
                "kernel_manager_class": "privleak.pipeline.kernel.LoggedKernelManager"
            },
            "LoggedKernelManager": {"output_file": str(log)},
            "KernelManager": {
                "transport": "ipc",
                "ip": os.path.join(sockets, "kernel"),
                # After its shutdown reply the kernel only tears down its interpreter (~1-3 s
                # with torch and a model loaded, at every stage): SIGTERM it after 0.5 s.
                "shutdown_wait_time": 1.0,
            },
        }
    )


def _papermill(notebook, executed: Path, values: dict, timeout: float | None, log: Path) -> None:
    import papermill

    # The system temp dir keeps the socket paths under the 107-byte limit of a Unix socket.
    with tempfile.TemporaryDirectory(prefix="privleak-") as sockets:
        papermill.execute_notebook(
            notebook,
            str(executed),
            parameters=values,
            kernel_name="python3",
            language="python",
            cwd=str(paths.ROOT),
            progress_bar=False,
            log_output=False,
            config=_kernel_config(log, sockets),
            # jupyter_client interrupts the kernel before shutting it down, and ipykernel logs
            # that KeyboardInterrupt (or its closed sockets, if it was busy) at ERROR on the
            # console. The kernel's own log is about its messaging, never the notebook's cells.
            extra_arguments=["--IPKernelApp.log_level=CRITICAL"],
            execution_timeout=timeout,
        )


def _execute(notebook, executed: Path, values: dict, timeout: float | None, log: Path) -> None:
    """Run the notebook into `executed` in a worker thread while the main thread waits, so a
    signal raises Interrupted here rather than half-way through papermill, nbclient or zmq."""
    failures: list[Exception] = []

    def work() -> None:
        try:
            _papermill(notebook, executed, values, timeout, log)
        except Exception as error:
            failures.append(error)

    worker = threading.Thread(target=work, name="privleak-notebook", daemon=True)
    worker.start()
    try:
        worker.join()
    except Interrupted:
        _stop_descendants()  # the worker sees its kernel die, saves the notebook and returns
        worker.join(_WORKER_GRACE_S)
        raise
    if failures:
        raise failures[0]


def _failure(error: Exception) -> str:
    """`<Error>: <first line of its message>` for a cell's exception or the runner's own."""
    import papermill

    if isinstance(error, papermill.PapermillExecutionError):
        name, value = error.ename, str(error.evalue)
    else:
        name, value = type(error).__name__, str(error)
    lines = value.strip().splitlines()
    return f"{name}: {lines[0]}" if lines else name


def _load(stage: str, profile: str | None):
    """The stage's declared param values, its outputs, its notebook and the profile it runs
    under; PrivleakError if bad.

    `profile` overrides params.yaml's selection for a manual run (dvc.yaml never passes it).
    """
    params = params_module.load()
    if profile is not None:
        require(
            profile in params_module.PROFILES,
            f"--profile '{profile}' is unknown; allowed: {', '.join(params_module.PROFILES)}",
        )
        params["profile"] = profile
    values = params_module.stage_params(stage, params)
    outputs = _Outputs(stage, params_module.stage_outputs(stage, params))
    source = paths.NOTEBOOKS / f"{stage}.py"
    require(source.exists(), f"stage '{stage}' has no notebook {source}")
    import jupytext

    notebook = jupytext.read(source)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3"}
    return values, outputs, notebook, params["profile"]


def _publish(executed: Path, report_dir: Path) -> None:
    """Move the executed notebook into reports/<stage>/, next to its HTML rendering (rendered in
    a fork of the kernels' zygote when there is one: `privleak.pipeline.report_html`)."""
    report_dir.mkdir(parents=True, exist_ok=True)
    html = report_dir / f"{report_dir.name}.html"
    if zygote.enabled():
        command = [sys.executable, "-m", report_html.__name__, str(executed), str(html)]
        done = subprocess.run(zygote.stand_in(command), capture_output=True)
        lines = done.stderr.decode(errors="replace").strip().splitlines()
        require(
            done.returncode == 0,
            f"the HTML report failed (status {done.returncode}): {lines[-1] if lines else ''}",
        )
    else:
        html.write_text(report_html.render(executed))
    shutil.move(executed, report_dir / f"{report_dir.name}.ipynb")


def run(stage: str, profile: str | None = None, timeout: float | None = None) -> None:
    """Execute the stage notebook with its declared params, all or nothing.

    Raises PrivleakError (a failed cell, dead kernel, cell timeout, bad params) or Interrupted;
    either way the declared outputs are as before the call. `timeout` bounds each cell, seconds.
    """
    values, outputs, notebook, profile = _load(stage, profile)
    failed = paths.REPORTS / "failed" / f"{stage}.ipynb"
    # Executed outside the outputs: a worker still saving it after an interruption cannot
    # overwrite the restored previous outputs.
    scratch = paths.ROOT / ".privleak" / "running" / f"{stage}.ipynb"
    log = kernel_log(stage)
    # The kernel inherits these: no tokenizer thread pool, and OpenMP threads that sleep instead
    # of spinning between ops (spinning made forwards ~3x slower on a shared 2-core machine).
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    logging.getLogger("papermill").addFilter(_QuietNbclient())
    logging.getLogger("asyncio").addFilter(_QuietTeardown())
    # Error messages in the notebook name params by their full path, profile included.
    os.environ[params_module.PROFILE_ENV] = profile
    started = time.perf_counter()
    began = False
    try:
        paths.remove(failed)
        scratch.parent.mkdir(parents=True, exist_ok=True)
        log.parent.mkdir(parents=True, exist_ok=True)
        outputs.set_aside()
        with _SIGNALS.armed():
            began = True
            _execute(notebook, scratch, values, timeout, log)
            _publish(scratch, paths.REPORTS / stage)
        unwritten = [_shown(o) for o in outputs.outputs if not _exists(o)]
        require(
            not unwritten,
            f"the notebook ended without writing the declared output {', '.join(unwritten)}",
        )
        require(
            not _contended(stage, os.getpid()).exists(),
            "another run of the stage was refused while this one ran, and a `dvc repro` that "
            "starts one removes the stage's outputs first: this run's may be incomplete, so the "
            "previous outputs are back; run it again",
        )
    except (Interrupted, Exception) as ending:
        _stop_descendants()
        kept = not isinstance(ending, Interrupted) and scratch.exists()
        if kept:
            failed.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(scratch, failed)
        outputs.restore(began)
        if isinstance(ending, Interrupted):
            raise
        see = f" (see {_shown(failed)})" if kept else ""
        raise PrivleakError(f"stage '{stage}' failed: {_failure(ending)}{see}") from None
    _stop_descendants()
    outputs.drop()
    checkpoint.clear(stage)  # the units of a finished run are in its outputs now
    _say(f"stage {stage}: {time.perf_counter() - started:.1f} s")


def _launched_by_dvc() -> bool:
    """DVC sets DVC_STAGE for every stage command it runs, after removing the stage's outputs."""
    return bool(os.environ.get("DVC_STAGE"))


def _locks() -> Path:
    return paths.ROOT / ".privleak" / "locks"


def _contended(stage: str, holder: int | str) -> Path:
    """Left for the run `holder` (a pid) by a `dvc repro` refused while it ran: DVC removed the
    stage's outputs before starting the refused command, so the holder's may have lost files."""
    return _locks() / f"{stage}.contended-{holder}"


@contextlib.contextmanager
def _exclusive(stage: str):
    """Hold .privleak/locks/<stage>.lock for the run: two runs of one stage would share its
    set-aside outputs and scratch notebook, and each would remove what the other wrote."""
    lock, holder = _locks() / f"{stage}.lock", _locks() / f"{stage}.holder"
    lock.parent.mkdir(parents=True, exist_ok=True)
    try:
        with FileLock(lock, timeout=0):
            for stale in _locks().glob(f"{stage}.contended-*"):
                stale.unlink(missing_ok=True)
            holder.write_text(str(os.getpid()))
            yield
    except Timeout:
        if _launched_by_dvc() and holder.exists():
            _contended(stage, holder.read_text().strip()).touch()
        raise PrivleakError(
            f"stage '{stage}' is already running (another run holds {_shown(lock)}); wait for "
            "it to end, then run again"
        ) from None


def _declared_outputs(stage: str, profile: str | None) -> list[Path]:
    """The stage's declared outputs under params.yaml as DVC resolved them (no validation: the
    params may be what failed); [] when they cannot be resolved."""
    try:
        params = yaml.safe_load(paths.PARAMS_FILE.read_text())
        if profile is not None:
            params["profile"] = profile
        return params_module.stage_outputs(stage, params)
    except (PrivleakError, OSError, yaml.YAMLError, TypeError, AttributeError):
        return []


def _restore_recorded(stage: str, profile: str | None) -> str:
    """After a failed run that DVC launched, put back the recorded outputs DVC removed before
    it; the clause to add to the failure line when some cannot be, else ""."""
    if not _launched_by_dvc():
        return ""  # nothing removed them: the run's own restore left them as before
    try:
        _, unavailable = recorded.restore(stage, _declared_outputs(stage, profile))
    except Exception as error:  # a damaged lock or cache: the failure line still comes first
        return f"; its recorded outputs could not be restored ({_failure(error)})"
    if not unavailable:
        return ""
    return (
        f"; neither the DVC cache nor git holds its recorded {', '.join(unavailable)} (rebuild "
        f"with `dvc repro -s {stage}`)"
    )


def main(argv: list[str] | None = None) -> int:
    _SIGNALS.install()
    _watch_launchers()
    parser = argparse.ArgumentParser(description="Run one dvc.yaml stage notebook.")
    parser.add_argument("stage")
    parser.add_argument("--profile", help="override params.yaml's profile for a manual run")
    parser.add_argument("--timeout", type=float, help="fail any cell that runs longer (seconds)")
    args = parser.parse_args(argv)
    try:
        with _exclusive(args.stage):
            try:
                run(args.stage, args.profile, args.timeout)
            except (Interrupted, PrivleakError) as ending:
                ending.lost = _restore_recorded(args.stage, args.profile)
                raise
    except Interrupted as ending:
        resumes = checkpoint.root(args.stage).exists()
        _say(
            f"privleak: error: stage '{args.stage}' interrupted ({ending}); partial outputs removed"
            + ("; finished units are kept in data/checkpoints, a rerun resumes" if resumes else "")
            + ending.lost
        )
        return 128 + ending.signum
    except PrivleakError as error:
        _say(f"privleak: error: {error}{getattr(error, 'lost', '')}")
        return EXIT_ERROR
    return 0


if __name__ == "__main__":
    sys.exit(main())
