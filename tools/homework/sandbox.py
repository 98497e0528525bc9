"""The sandbox a submission runs in while it is graded, built with bubblewrap (``bwrap``).

Each submission gets its own ``bwrap`` process tree:

- its own PID namespace (``--unshare-pid``; nothing outside is visible in ``/proc``, and every process
  inside dies with the sandbox: ``--die-with-parent``, and the grader kills the whole tree at the end),
  a new session (``--new-session``: no access to the grader's terminal), no network (``--unshare-net``),
  its own IPC and host name;
- a file system made of read-only binds: the system (``/usr``), the Python installation, the virtual
  environment and the ``attnbook`` package source. Nothing else of the host: not the repository (the
  homework sources with their hidden tests), not the other submissions, not the output folder.
  Writable: a private work folder (``/sandbox``, holding only the driver) and ``/tmp``, both small
  tmpfs that vanish with the sandbox;
- an empty environment (``--clearenv``) but for a few variables this module sets;
- when the grader runs as root, an unprivileged user of its own (one uid per worker slot, no
  capabilities, ``no_new_privs``), so the process-count limit counts only that sandbox's processes;
  otherwise a user namespace with every capability dropped;
- limits set before ``bwrap`` starts and inherited by everything inside: address space, CPU time,
  processes, file size and open files.

:func:`probe` runs a tiny program in such a sandbox; the grader refuses to grade when it fails,
unless the instructor asks for ``--unsafe-no-sandbox``, which runs the same driver as a plain process.
"""

from __future__ import annotations

import json
import os
import resource
import select
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from tools import ROOT
from tools.homework import sandbox_driver

DRIVER = Path(sandbox_driver.__file__).resolve()  # copied, read-only, into the sandbox: it imports no tools
INSTALL_HINT = "apt-get install bubblewrap"
BASE_UID = 1_200_000  # sandbox uids, one per worker slot, when grading as root: no account uses them
MEMORY_BYTES = 3 * 1024 ** 3  # address space of each process in the sandbox
PROCESSES = 64
FILE_BYTES = 64 * 1024 ** 2
OPEN_FILES = 256
TMP_BYTES = 64 * 1024 ** 2
START_TIMEOUT_S = 60  # IPython and numpy import in well under this, even on a busy machine
GRACE_S = 2  # past a timeout, how long the driver has to report its own interrupt


class SandboxError(Exception):
    """The sandbox cannot be built on this machine; the message says why and what to install."""


class SandboxDied(Exception):
    """The process in the sandbox exited or stopped answering; ``reason`` says which, in words."""

    def __init__(self, reason: str, timed_out: bool = False):
        super().__init__(reason)
        self.reason = reason
        self.timed_out = timed_out


def bwrap_path() -> str | None:
    return os.environ.get("ATTNBOOK_BWRAP") or shutil.which("bwrap")


def _read_only_trees() -> list[Path]:
    """What the sandbox needs to run Python with numpy and attnbook: every path read-only."""
    import attnbook

    trees = {Path(sys.prefix), Path(sys.base_prefix), Path(sysconfig.get_paths()["purelib"]),
             Path(attnbook.__file__).resolve().parent.parent}
    executable = Path(sys.executable)
    trees.add(executable.resolve().parent.parent)
    return sorted(path for path in trees if not str(path).startswith("/usr/"))


def _environment(home: str) -> dict[str, str]:
    return {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8",
            "TMPDIR": "/tmp", "MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1", "IPYTHONDIR": "/tmp/ipython",
            "MPLCONFIGDIR": "/tmp/matplotlib", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}


def command(workdir: Path | None, slot: int, sandboxed: bool) -> tuple[list[str], list[str], dict | None]:
    """How to start the driver: (bwrap options, program, environment).

    In the sandbox the driver's work folder is ``/sandbox``, a size-limited tmpfs of its own holding a
    read-only copy of the driver; without the sandbox it is ``workdir``, a folder of the host.

    The options go to bwrap through a pipe (``--args``), so that the sandbox's PID 1, a copy of bwrap,
    does not show the host's paths in its ``/proc/1/cmdline``.
    """
    python = sys.executable
    if not sandboxed:
        return [], [python, str(workdir / DRIVER.name)], _environment(str(workdir))
    args = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--hostname", "sandbox",
            "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
            "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/sbin", "/sbin",
            "--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size", str(TMP_BYTES), "--tmpfs", "/tmp"]
    for path in ("/etc/alternatives", "/etc/ld.so.cache", "/etc/localtime"):
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    made: set[str] = set()
    for tree in _read_only_trees():
        for parent in reversed(tree.parents):  # bwrap would make missing parents 0700: unreadable to a uid
            if str(parent) != "/" and str(parent) not in made:
                args += ["--perms", "0755", "--dir", str(parent)]
                made.add(str(parent))
        args += ["--ro-bind", str(tree), str(tree)]
    args += ["--perms", "1777", "--size", str(TMP_BYTES), "--tmpfs", "/sandbox",
             "--ro-bind", str(DRIVER), f"/sandbox/{DRIVER.name}", "--chdir", "/sandbox", "--clearenv"]
    for name, value in _environment("/sandbox").items():
        args += ["--setenv", name, value]
    program = [python, DRIVER.name]
    if os.geteuid() == 0:
        uid = str(BASE_UID + slot)
        program[:0] = ["/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                       "--bounding-set=-all", "--inh-caps=-all", "--no-new-privs"]
    else:
        args[:0] = ["--unshare-user", "--cap-drop", "ALL"]
    return args, program, None


def spawn(options: list[str], program: list[str], **popen) -> subprocess.Popen:
    """Start ``program`` under bwrap with ``options`` (or alone when there are none)."""
    if not options:
        return subprocess.Popen(program, **popen)
    bwrap = bwrap_path()
    if not bwrap:
        raise SandboxError(f"bubblewrap (bwrap) is not installed; install it ({INSTALL_HINT})")
    data = b"".join(option.encode() + b"\0" for option in options)
    read, write = os.pipe()
    try:
        if len(data) > 60000:  # a pipe holds 64 KiB: written before bwrap starts, it must fit
            raise SandboxError("the sandbox options are too long for a pipe")
        os.write(write, data)
        os.close(write)
        write = -1
        return subprocess.Popen([bwrap, "--args", str(read), "--", *program], pass_fds=(read,), **popen)
    finally:
        os.close(read)
        if write >= 0:
            os.close(write)


def _user_process_count() -> int:
    """How many processes this user runs now (what RLIMIT_NPROC compares against)."""
    uid, count = os.geteuid(), 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                count += entry.stat().st_uid == uid
            except FileNotFoundError:  # ended while we looked
                pass
    return count


def _limits(cpu_seconds: float, sandboxed: bool):
    """Resource limits for the child before it becomes bwrap (or the driver); inherited inside.

    The process limit counts every process of the sandbox's uid. As root each sandbox has a uid of its
    own, so it may hold ``PROCESSES``; as another user the sandbox shares the grader's uid, so it may add
    ``PROCESSES`` to what that user runs when it starts.
    """
    processes = PROCESSES if os.geteuid() == 0 else _user_process_count() + PROCESSES

    def apply() -> None:
        os.setsid()  # its own process group: the grader stops the whole group
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
        cpu = int(cpu_seconds) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_BYTES, FILE_BYTES))
        resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if sandboxed:
            resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
    return apply


class Session:
    """One running driver (in its sandbox) for one submission; restarted when it dies or hangs."""

    def __init__(self, slot: int = 0, sandboxed: bool = True, cpu_seconds: float = 300):
        self.slot, self.sandboxed, self.cpu_seconds = slot, sandboxed, cpu_seconds
        self.process: subprocess.Popen | None = None
        self.workdir: Path | None = None
        self._buffer = b""

    def start(self) -> None:
        self.stop()
        if not self.sandboxed:
            self.workdir = Path(tempfile.mkdtemp(prefix="unsafe-grading-"))
            shutil.copy(DRIVER, self.workdir / DRIVER.name)
        options, program, env = command(self.workdir, self.slot, self.sandboxed)
        self.process = spawn(options, program, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, cwd=self.workdir or "/", env=env,
                             preexec_fn=_limits(self.cpu_seconds, self.sandboxed))
        self._buffer = b""
        try:
            ready = json.loads(self._read_line(START_TIMEOUT_S))
        except SandboxDied as died:
            raise SandboxDied(f"the kernel did not start ({died.reason})") from None
        except ValueError:
            ready = None
        if ready != {"ready": True}:
            self.stop()
            raise SandboxDied("the kernel did not start (it did not say it was ready)")

    def request(self, message: dict, timeout: float) -> dict:
        """Send one request; its answer, or SandboxDied when the driver exits or overruns ``timeout``."""
        if self.process is None or self.process.poll() is not None:
            raise SandboxDied("the kernel died")
        try:
            self.process.stdin.write(json.dumps(message).encode() + b"\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            self.stop()
            raise SandboxDied("the kernel died") from None
        line = self._read_line(timeout)
        try:
            answer = json.loads(line)
        except ValueError:
            self.stop()
            raise SandboxDied("the kernel sent an answer that is not JSON") from None
        if not isinstance(answer, dict):
            self.stop()
            raise SandboxDied("the kernel sent an answer that is not an object")
        return answer

    def _read_line(self, timeout: float) -> bytes:
        stream = self.process.stdout
        descriptor = stream.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                self.stop()
                raise SandboxDied("the kernel did not answer in time", timed_out=True)
            ready, _, _ = select.select([descriptor], [], [], left)
            if not ready:
                continue
            chunk = os.read(descriptor, 1 << 20)
            if not chunk:
                self.stop()
                raise SandboxDied("the kernel died")
            self._buffer += chunk
            if len(self._buffer) > sandbox_driver.MAX_LINE_BYTES:
                self.stop()
                raise SandboxDied("the kernel sent an answer larger than the grader reads")
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line

    def stop(self) -> None:
        """Kill the sandbox and everything in it, and remove its work folder."""
        if self.process is not None:
            if self.process.poll() is None:
                try:
                    os.killpg(self.process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.process.wait()
            for stream in (self.process.stdin, self.process.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
            self.process = None
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None


PROBE = """
import json, os
import numpy, attnbook
answer = {"pid": os.getpid(), "uid": os.getuid(), "env": sorted(os.environ),
          "sees_repository": os.path.exists(%r), "package_writable": os.access(%r, os.W_OK)}
print(json.dumps(answer))
"""


def probe() -> dict:
    """Run a tiny program in a sandbox and check what it sees; a SandboxError says what is wrong."""
    import attnbook

    bwrap = bwrap_path()
    if not bwrap:
        raise SandboxError(f"bubblewrap (bwrap) is not installed; install it ({INSTALL_HINT})")
    package = str(Path(attnbook.__file__).resolve().parent)
    exercises = str(ROOT / "exercises")
    options, program, _ = command(None, 0, True)
    program = program[:-1] + ["-c", PROBE % (exercises, package)]
    try:
        process = spawn(options, program, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                        preexec_fn=_limits(30, True))
        stdout, stderr = process.communicate(timeout=START_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)  # bwrap and, with it, the sandbox
        process.communicate()
        raise SandboxError(f"the sandbox probe did not finish in {START_TIMEOUT_S} s") from None
    except OSError as error:
        raise SandboxError(f"the sandbox did not start ({type(error).__name__}: {error})") from None
    finished = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    if finished.returncode != 0:
        said = " ".join(finished.stderr.split())[-300:]
        raise SandboxError(f"the sandbox did not start (bwrap exit code {finished.returncode}: {said})")
    try:
        seen = json.loads(finished.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise SandboxError(f"the sandbox probe printed no answer: {finished.stdout[-200:]!r}") from None
    wrong = []
    if seen["pid"] > 3:
        wrong.append(f"the probe ran as PID {seen['pid']}: no PID namespace of its own")
    if seen["sees_repository"]:
        wrong.append("the probe could see the homework sources")
    if seen["package_writable"]:
        wrong.append("the probe could write to the attnbook package")
    if os.geteuid() == 0 and seen["uid"] == 0:
        wrong.append("the probe ran as root")
    if wrong:
        raise SandboxError("; ".join(wrong))
    return seen
