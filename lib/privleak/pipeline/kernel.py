"""The kernel manager the stage runner starts notebooks with.

A kernel writes to its own file descriptors 1 and 2 only outside cells (ipykernel sends what cells
write, fd-level writes included, to the notebook): at startup and at teardown, where libzmq may
abort on a socket the runner's SIGTERM closed mid-poll. Those lines are about the kernel's
messaging, not the stage, and would break the runner's one-line contract on stderr; they go to
.privleak/kernels/<stage>.log instead.
"""

from __future__ import annotations

import typing as t

from jupyter_client.manager import AsyncKernelManager
from traitlets import Unicode


class LoggedKernelManager(AsyncKernelManager):
    """An AsyncKernelManager whose kernel process writes its stdout and stderr to `output_file`."""

    output_file = Unicode(help="the file the kernel's stdout and stderr go to, overwritten").tag(
        config=True
    )

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: t.Any) -> None:
        # jupyter_client's documented override point for how the kernel process is launched;
        # Popen dups the handle, so it is closed here once the kernel runs.
        with open(self.output_file, "wb") as output:
            redirected = {**kw, "stdout": output, "stderr": output}
            await super()._async_launch_kernel(kernel_cmd, **redirected)
