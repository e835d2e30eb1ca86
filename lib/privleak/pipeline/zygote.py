"""Stage kernels forked from a warm parent: each stage's notebook starts with torch,
transformers, pandas and ipykernel already imported, instead of paying their 5-8 s of
imports in every stage.

The stage runner's kernel manager (`privleak.pipeline.kernel`) launches

    python -m privleak.pipeline.zygote python -m ipykernel_launcher -f CONNECTION ...

in place of the kernel command. That process, the *stand-in*, asks a *zygote* (one per
interpreter, site-packages and environment; started on first use, in its own session, and gone
after IDLE_S seconds without a kernel) to fork a kernel that runs the command's module. The
stand-in is what jupyter_client sees as the kernel: SIGINT goes to the kernel's process group,
SIGTERM and SIGHUP stop the kernel and every process it started (SIGKILL after STOP_GRACE_S), the
runner's death stops them too (as ipykernel's parent watch would), and the stand-in exits with
the kernel's status; the kernel (with the processes it started) is killed when the stand-in
dies. Anything that goes wrong before the fork falls back to running the kernel command
itself, so a stage never depends on the zygote: with no zygote up, the stand-in starts one in
the background and runs its own kernel as before.

What the fork shares with a fresh kernel: the command, working directory, environment, umask,
CPU affinity and niceness are the stand-in's (the zygote is keyed by every environment variable
a library may read at import, `_key`; what its own imports added to the environment is kept); a
fork forgets every privleak module (edited between stages) and keeps only the third-party ones
and their caches (the HTML exporter's, warmed by rendering one small notebook:
`privleak.pipeline.report_html` runs in a fork too; matplotlib's, imported with the backend
ipykernel would select: `PRELOAD`); what the zygote loaded is frozen out of the garbage
collector's sight (`gc.freeze`), so a kernel's collections walk only its own objects (IPython
runs a full one as the kernel shuts down: 0.26 s over torch's and transformers' objects, 2 µs
with them frozen); the zygote starts no thread of its own
before it forks, so each kernel's torch starts its thread pools itself (the import-time pools
of OpenBLAS and jemalloc have fork handlers of their own). It serves its own user only (a 0600
socket, the peer's credentials checked). The smoke DAG's outputs are byte-identical with and
without it. Off with PRIVLEAK_ZYGOTE=0 and while stages are profiled (py-spy samples the
kernel's process).
"""

from __future__ import annotations

import array
import contextlib
import gc
import hashlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

MODULE = "privleak.pipeline.zygote"  # this module's name, also where it runs as __main__
ENV = "PRIVLEAK_ZYGOTE"
IDLE_S = 60.0
"""A zygote exits after this long with no kernel running and no request."""
STOP_GRACE_S = 1.5
"""After a forwarded SIGTERM or SIGHUP, how long the kernel's processes get before SIGKILL
(within the runner's own 3 s grace for the stand-in)."""
PRELOAD = (
    "numpy",
    "pandas",
    "scipy.stats",
    "torch",
    "transformers",
    "transformers.models.llama.modeling_llama",
    "sentence_transformers",
    "ipykernel.kernelapp",
    "matplotlib.pyplot",
    "seaborn",
)
"""Third-party modules only. matplotlib reads its backend from MPLBACKEND at import, which
ipykernel sets in a fresh kernel (to INLINE_BACKEND, unless the environment names one): the
zygote sets it as ipykernel would before it imports (`_as_a_kernel_would`), and forks no kernel
for a directory holding a matplotlibrc (which matplotlib reads before any other) unless the
zygote read that same file (`_matplotlibrc`)."""
INLINE_BACKEND = "module://matplotlib_inline.backend_inline"
# Set per stage or per kernel by the runner, DVC, jupyter_client or pytest (PRIVLEAK_ROOT: read
# by privleak only, which a fork imports anew), and read by no preloaded module at import: they
# do not select the zygote, and each kernel gets its own values.
_PER_KERNEL_PREFIXES = ("JPY_", "DVC_")
_PER_KERNEL_NAMES = (
    "PRIVLEAK_PROFILE", "PRIVLEAK_ROOT", "PYTEST_CURRENT_TEST", "PWD", "OLDPWD", "SHLVL", "_",
)  # fmt: skip
_PR_SET_PDEATHSIG = 1
_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
              signal.SIGUSR2)  # fmt: skip


def enabled() -> bool:
    """Whether stage kernels are forked from a zygote: on Linux, unless PRIVLEAK_ZYGOTE=0 or
    stages are profiled (PRIVLEAK_PROFILE_DIR)."""
    return (
        sys.platform.startswith("linux")
        and os.environ.get(ENV, "1") != "0"
        and not os.environ.get("PRIVLEAK_PROFILE_DIR")
    )


def stand_in(kernel_cmd: list[str]) -> list[str]:
    """The command that launches `kernel_cmd` (`python -m MODULE ARGS...`) through a zygote."""
    return [sys.executable, "-m", MODULE, *kernel_cmd]


def _per_kernel(name: str) -> bool:
    return name in _PER_KERNEL_NAMES or name.startswith(_PER_KERNEL_PREFIXES)


def _as_a_kernel_would(env: dict[str, str]) -> None:
    """Set in `env` what ipykernel's start sets in a fresh kernel before a cell can import
    matplotlib: MPLBACKEND, to its inline backend unless it names one already."""
    if not env.get("MPLBACKEND"):
        env["MPLBACKEND"] = INLINE_BACKEND


def _matplotlibrc(cwd: str) -> str | None:
    """The matplotlibrc in `cwd`, which matplotlib reads at import before any other, if any."""
    local = Path(cwd, "matplotlibrc")
    return str(local) if local.is_file() else None


def _key(env: dict[str, str]) -> str:
    """The zygote's identity: the interpreter, its site-packages (installing a package changes
    the directory's mtime) and every environment variable but the per-kernel ones."""
    import sysconfig

    site = Path(sysconfig.get_paths()["purelib"])
    shared = sorted((k, v) for k, v in env.items() if not _per_kernel(k))
    text = json.dumps([sys.executable, str(site), site.stat().st_mtime_ns, shared])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _socket_path(key: str) -> Path:
    # The system temp dir keeps the path under the 107-byte limit of a Unix socket.
    return Path(tempfile.gettempdir()) / f"privleak-zygote-{os.getuid()}-{key}.sock"


# ---------------------------------------------------------------- the stand-in


def _connect(path: Path) -> socket.socket | None:
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        client.connect(str(path))
    except OSError:
        client.close()
        return None
    return client


def _zygote(path: Path) -> socket.socket | None:
    """A connection to the zygote at `path`; None when none answers, after starting one (in its
    own session, outside the runner's process tree) unless one is starting already. The caller
    then runs its command itself: a first stage costs what it did without a zygote, and the
    ones after it find the zygote warm."""
    client = _connect(path)
    if client is not None:
        return client
    import fcntl

    with open(f"{path}.lock", "w") as lock:
        try:  # a zygote holds this lock until it listens
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        # Returns at once: the zygote detaches (`main`), keeps the lock (the inherited open file)
        # until it listens, and writes its own output to the log.
        with open(f"{path}.log", "wb") as log:
            subprocess.run(
                [sys.executable, "-m", MODULE, "--serve", str(path), str(lock.fileno())],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, pass_fds=(lock.fileno(),),
                check=False,
            )  # fmt: skip
    return None


def ready(env: dict[str, str]) -> bool:
    """Whether a zygote for `env` answers."""
    client = _connect(_socket_path(_key(env)))
    if client is not None:
        client.close()
    return client is not None


def _read_line(conn: socket.socket) -> str | None:
    data = b""
    while not data.endswith(b"\n"):
        try:
            chunk = conn.recv(256)
        except InterruptedError:
            continue
        except OSError:  # reset: the zygote is gone
            return None
        if not chunk:
            return None
        data += chunk
    return data.decode().strip()


def _tree(root) -> list:
    """The psutil processes of `root` (a psutil.Process) and its descendants, descendants first
    (a parent stopped first would leave them unlisted); [] once it is gone."""
    import psutil

    try:
        return [*root.children(recursive=True), root] if root.is_running() else []
    except psutil.Error:
        return []


def _signal_all(processes: list, sig: int) -> None:
    import psutil

    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.send_signal(sig)  # psutil checks the pid still names that process


def _stop_tree(root, sig: int) -> None:
    """`sig` to the kernel and everything it started; SIGKILL to what outlives STOP_GRACE_S."""
    import psutil

    processes = _tree(root)
    _signal_all(processes, sig)
    _, alive = psutil.wait_procs(processes, timeout=STOP_GRACE_S)
    _signal_all(alive, signal.SIGKILL)


def _die_with_parent(parent: int) -> None:
    """SIGTERM to this process when its parent `parent` (the stage runner) dies, as a kernel it
    started would notice; and at once if it has died already."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent or parent == 1:
        os.kill(os.getpid(), signal.SIGTERM)


def run_stand_in(kernel_cmd: list[str]) -> int:
    """Run `kernel_cmd` in a kernel forked by the zygote and return its exit status; run it
    in this process (exec) when it is not `python -m MODULE ...` or no zygote answers."""
    launcher = os.getppid()
    forkable = (
        len(kernel_cmd) >= 3
        and kernel_cmd[1] == "-m"
        and os.path.realpath(kernel_cmd[0]) == os.path.realpath(sys.executable)
    )
    conn = _zygote(_socket_path(_key(dict(os.environ)))) if forkable else None
    if conn is None:
        os.execv(kernel_cmd[0], kernel_cmd)
    umask = os.umask(0o022)
    os.umask(umask)
    request = {
        "argv": kernel_cmd[2:], "env": dict(os.environ), "cwd": os.getcwd(), "umask": umask,
        "affinity": sorted(os.sched_getaffinity(0)), "nice": os.nice(0),
    }  # fmt: skip
    fds = array.array("i", [0, 1, 2])
    rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)]
    try:
        conn.sendmsg([json.dumps(request).encode() + b"\n"], rights)
    except OSError:  # the zygote went away after accepting
        os.execv(kernel_cmd[0], kernel_cmd)
    reply = _read_line(conn)
    if reply is None:  # the zygote died before forking: nothing runs yet
        os.execv(kernel_cmd[0], kernel_cmd)
    import psutil

    pid = int(reply)
    try:
        kernel = psutil.Process(pid)
    except psutil.NoSuchProcess:  # it ended already: its status is on the way
        kernel = None

    def forward(signum, _frame):
        # As if sent to the kernel itself: jupyter_client interrupts the kernel's process group;
        # the runner stops every process the kernel started, killing what outlives a grace.
        if kernel is None:
            return
        if signum == signal.SIGINT:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signum)
        elif signum in (signal.SIGTERM, signal.SIGHUP):
            _stop_tree(kernel, signum)
        else:
            _signal_all(_tree(kernel), signum)

    for signum in _FORWARDED:
        signal.signal(signum, forward)
    _die_with_parent(launcher)
    status = _read_line(conn)
    if status is None:  # the zygote died: the kernel's status is lost with it
        if kernel is not None:
            _signal_all(_tree(kernel), signal.SIGKILL)
        return 1
    code = int(status)
    if code < 0:  # killed by a signal: end the same way, as the kernel itself would have
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


# ---------------------------------------------------------------- the zygote


def _child(
    conn: socket.socket, request: dict, fds: list[int], started_in: str, imported: dict[str, str]
) -> None:
    """In the forked kernel: take the stand-in's stdio, directory, environment (with what the
    zygote's imports added to theirs), umask, CPU affinity and niceness, forget any privleak
    module the zygote imported, die with the stand-in, and run the requested module as __main__.
    Never returns."""
    code = 1
    try:
        for name in [n for n in sys.modules if n == "privleak" or n.startswith("privleak.")]:
            del sys.modules[name]
        if sys.path and sys.path[0] == started_in:  # `python -m` puts the working dir first
            sys.path[0] = request["cwd"]
        for target, fd in zip((0, 1, 2), fds, strict=True):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update({**imported, **request["env"]})
        os.umask(request["umask"])
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, request["affinity"])
        os.nice(max(request["nice"] - os.nice(0), 0))
        # transformers' log handler holds the zygote's stderr; a fresh kernel's writes to the
        # cell's (ipykernel's): make the next log call build it anew, as a fresh import would
        hf_logging = sys.modules.get("transformers.utils.logging")
        if hf_logging is not None and hasattr(hf_logging, "_reset_library_root_logger"):
            hf_logging._reset_library_root_logger()

        def die_with_stand_in() -> None:
            while True:
                try:
                    if not conn.recv(1):
                        break
                except InterruptedError:
                    continue
                except OSError:
                    break
            _signal_all(_tree(__import__("psutil").Process()), signal.SIGKILL)

        threading.Thread(target=die_with_stand_in, name="privleak-stand-in", daemon=True).start()
        import runpy

        module, *arguments = request["argv"]
        sys.argv = [module, *arguments]
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as ending:
            code = ending.code if isinstance(ending.code, int) else (ending.code is not None)
        import atexit

        atexit._run_exitfuncs()
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(int(code))


def _receive(conn: socket.socket) -> tuple[dict, list[int]] | None:
    """A request (one JSON line) and the three descriptors that came with it, from a process of
    this user; None for anything else."""
    uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[1]
    if uid != os.getuid():
        return None
    conn.settimeout(10.0)  # a stuck client must not hold up every other stand-in
    data, fds = b"", []
    while not data.endswith(b"\n"):
        chunk, ancillary, _, _ = conn.recvmsg(1 << 16, socket.CMSG_SPACE(3 * 4))
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds += array.array("i", payload[: len(payload) - len(payload) % 4]).tolist()
        if not chunk:
            for fd in fds:
                os.close(fd)
            return None
        data += chunk
    conn.settimeout(None)
    if len(fds) != 3:
        for fd in fds:
            os.close(fd)
        return None
    return json.loads(data), fds


def _fork(conn, request, fds, started_in, imported, closing) -> int:
    """Fork a kernel for `request` and return its pid (in the zygote)."""
    pid = os.fork()
    if pid == 0:
        signal.set_wakeup_fd(-1)
        for signum in (signal.SIGCHLD, signal.SIGTERM):
            signal.signal(signum, signal.SIG_DFL)
        for end in closing:
            with contextlib.suppress(OSError):
                os.close(end)
        _child(conn, request, fds, started_in, imported)
    with contextlib.suppress(OSError):  # the child does the same: no window without a group
        os.setpgid(pid, pid)
    return pid


def serve(path: Path, lock: int) -> None:
    """Import PRELOAD, then fork a kernel per request until IDLE_S pass with none running (or
    another zygote took the socket path, or SIGTERM came, once its kernels have ended).

    Single-threaded: a process that forks must not hold threads. Each request's connection
    gets the kernel's pid, then its exit status; a request that fails is closed unanswered, and
    its stand-in runs the kernel itself."""
    import importlib

    before = dict(os.environ)
    _as_a_kernel_would(os.environ)
    for module in PRELOAD:
        importlib.import_module(module)
    importlib.import_module("privleak.pipeline.report_html").warm()  # the runner's HTML reports
    # What is loaded now lives as long as the zygote: out of the collector's sight, a kernel's
    # full collections (IPython runs one as it shuts down) walk only what the kernel made.
    gc.freeze()
    imported = {k: v for k, v in os.environ.items() if before.get(k) != v}  # e.g. debugpy's
    started_in = os.getcwd()
    read_rc = _matplotlibrc(started_in)
    path.unlink(missing_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    mask = os.umask(0o077)  # the socket: this user's only
    try:
        server.bind(str(path))
    finally:
        os.umask(mask)
    server.listen(16)
    os.close(lock)  # listening: stand-ins connect now, none starts another zygote
    inode = path.stat().st_ino
    # A child's exit wakes the loop (its status goes out at once), as a request does.
    wake, woken = os.pipe()
    for end in (wake, woken):
        os.set_blocking(end, False)
    signal.set_wakeup_fd(woken)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    kernels: dict[int, socket.socket] = {}
    last = time.monotonic()
    accepting = True
    while accepting or kernels:
        ready, _, _ = select.select([server, wake] if accepting else [wake], [], [], 1.0)
        if wake in ready:
            with contextlib.suppress(BlockingIOError):
                while os.read(wake, 512):
                    pass
        if accepting and server in ready:
            conn = None
            try:
                conn, _ = server.accept()
                received = _receive(conn)
                if received is not None and _matplotlibrc(received[0]["cwd"]) != read_rc:
                    for fd in received[1]:  # its matplotlib would read another rc file
                        os.close(fd)
                    received = None
                if received is None:
                    conn.close()
                else:
                    request, fds = received
                    closing = [
                        wake,
                        woken,
                        server.fileno(),
                        *(c.fileno() for c in kernels.values()),
                    ]
                    pid = _fork(conn, request, fds, started_in, imported, closing)
                    for fd in fds:
                        os.close(fd)
                    kernels[pid] = conn
                    conn.sendall(f"{pid}\n".encode())
            except Exception:  # this request only: the zygote serves the others
                if conn is not None and conn not in kernels.values():
                    conn.close()
        while kernels:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            conn = kernels.pop(pid, None)
            if conn is not None:
                with contextlib.suppress(OSError):
                    conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
                conn.close()
        if kernels:
            last = time.monotonic()
        replaced = not path.exists() or path.stat().st_ino != inode
        if accepting and (replaced or stopping or time.monotonic() - last > IDLE_S):
            accepting = False
            server.close()
            if not replaced:
                path.unlink(missing_ok=True)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--serve"]:
        # Detach: the zygote is no child of the stand-in (nor of the stage runner, which stops
        # every descendant when its stage ends), and in a session of its own.
        if os.fork() > 0:
            return 0
        os.setsid()
        serve(Path(argv[1]), int(argv[2]))
        return 0
    return run_stand_in(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
