"""The kernel manager the stage runner starts notebooks with.

A kernel writes to its own file descriptors 1 and 2 at startup and at teardown, where libzmq may
abort on a socket the runner's SIGTERM closed mid-poll; what cells write at the fd level (C
libraries, subprocesses) goes to the notebook and is echoed on those fds too. Those would break the
runner's one-line contract on stderr; they go to .privleak/kernels/<stage>.log instead, and the
notebook keeps what its cells wrote.

With PRIVLEAK_PROFILE_DIR set, a py-spy sampler follows the kernel and the worker processes it
starts and writes their collapsed stacks to <dir>/<stage>.txt when the kernel exits
(`benchmarks/profile_stages.py` sums them by kind of work). The sampler runs in its own session,
outside the runner's process tree, so stopping the stage's processes never cuts its file short;
nothing waits for it, so the last stage's file may appear a moment after `dvc repro` returns. A
sampler that cannot attach says why in <dir>/<stage>.log.

Unprofiled kernels are forked from a warm parent with the heavy imports done
(`privleak.pipeline.zygote`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import typing as t
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager
from traitlets import Unicode

from privleak.pipeline import zygote

PROFILE_ENV = "PRIVLEAK_PROFILE_DIR"
PROFILE_RATE_HZ = 20


def profiler_command(pid: int, output: Path) -> list[str]:
    """The py-spy command that samples process `pid` and its children (no pausing of the target)
    until it exits, writing collapsed stacks to `output`."""
    pyspy = shutil.which("py-spy")
    if pyspy is None:
        raise RuntimeError(f"{PROFILE_ENV} is set but py-spy is not installed (pip install py-spy)")
    return [
        pyspy, "record", "--pid", str(pid), "--subprocesses", "--nonblocking",
        "--rate", str(PROFILE_RATE_HZ), "--format", "raw", "--output", str(output),
    ]  # fmt: skip


class LoggedKernelManager(AsyncKernelManager):
    """An AsyncKernelManager whose kernel process writes its stdout and stderr to `output_file`."""

    output_file = Unicode(help="the file the kernel's stdout and stderr go to, overwritten").tag(
        config=True
    )

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: t.Any) -> None:
        # jupyter_client's documented override point for how the kernel process is launched;
        # Popen dups the handle, so it is closed here once the kernel runs.
        profile_dir = os.environ.get(PROFILE_ENV)
        if profile_dir:
            profiler_command(0, Path(profile_dir))  # no py-spy: fail before any kernel starts
        if zygote.enabled():
            kernel_cmd = zygote.stand_in(kernel_cmd)
        with open(self.output_file, "wb") as output:
            redirected = {**kw, "stdout": output, "stderr": output}
            await super()._async_launch_kernel(kernel_cmd, **redirected)
        if profile_dir:
            Path(profile_dir).mkdir(parents=True, exist_ok=True)
            stage = Path(self.output_file).stem
            command = profiler_command(self.provisioner.pid, Path(profile_dir) / f"{stage}.txt")
            with open(Path(profile_dir) / f"{stage}.log", "wb") as log:
                subprocess.Popen(["setsid", "-f", *command], stdout=log, stderr=log)
