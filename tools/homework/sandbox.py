"""The sandbox a submission runs in while it is graded, built with bubblewrap (``bwrap``).

Each submission gets its own ``bwrap`` process tree:

- its own PID namespace (``--unshare-pid``; nothing outside is visible in ``/proc``, and every process
  inside dies with the sandbox: ``--die-with-parent``, and the grader kills the whole tree at the end),
  a new session (``--new-session``: no access to the grader's terminal) with a new, empty session key
  ring, no network (``--unshare-net``), its own IPC and host name;
- a file system made of read-only binds: the system (``/usr``), the Python installation, the virtual
  environment and the ``attnbook`` package source. Nothing else of the host: not the repository (the
  homework sources with their hidden tests), not the other submissions, not the output folder.
  Writable: a private work folder (``/sandbox``, holding only the driver) and ``/tmp``, both small
  tmpfs that vanish with the sandbox;
- a seccomp filter (:mod:`tools.homework.seccomp`) that refuses the system calls that reach state
  outside it: key rings, new namespaces, tracing, kernel programs, mounts, modules, and every socket
  family but local and routing-netlink sockets;
- an empty environment (``--clearenv``) but for a few variables this module sets;
- when the grader runs as root, an unprivileged uid of its own for this submission
  (:func:`tools.homework.traces.lease_uid`; no capabilities, ``no_new_privs``); otherwise a user
  namespace with every capability dropped, whose own tasks the process limit counts (set in it by ``prlimit``);
- memory and processes capped, and the CPU shared, for the sandbox as a whole, by a control group where
  the machine allows it (:mod:`tools.homework.cgroups`), and limits set before ``bwrap`` starts and
  inherited by everything inside: address space, CPU time, processes, file size and open files.

When the submission is done, :meth:`Session.close` checks that its uid and its PID namespace own nothing
any more on the host, and cleans and reports what they do (:mod:`tools.homework.traces`).

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
from tools.homework import cgroups, sandbox_driver, seccomp, traces

DRIVER = Path(sandbox_driver.__file__).resolve()  # copied, read-only, into the sandbox: it imports no tools
INSTALL_HINT = "apt-get install bubblewrap"
SECCOMP_HINT = "pip install pyseccomp==0.1.2 (it needs libseccomp2, which Debian and Ubuntu always have)"
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
    """bubblewrap's program (``ATTNBOOK_BWRAP`` names another), or None when there is none to run."""
    path = os.environ.get("ATTNBOOK_BWRAP") or shutil.which("bwrap")
    return path if path and os.access(path, os.X_OK) else None


def _read_only_trees() -> list[Path]:
    """What the sandbox needs to run Python with numpy and attnbook: every path read-only."""
    import attnbook

    trees = {Path(sys.prefix), Path(sys.base_prefix), Path(sysconfig.get_paths()["purelib"]),
             Path(attnbook.__file__).resolve().parent.parent}
    executable = Path(sys.executable)
    trees.add(executable.resolve().parent.parent)
    return sorted(path for path in trees if not str(path).startswith("/usr/"))


def _environment(home: str) -> dict[str, str]:
    import attnbook

    package = str(Path(attnbook.__file__).resolve().parent.parent)  # bound read-only: the grader's own attnbook
    return {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8",
            "PYTHONPATH": package,
            "TMPDIR": "/tmp", "MPLBACKEND": "Agg", "PYTHONDONTWRITEBYTECODE": "1", "IPYTHONDIR": "/tmp/ipython",
            "MPLCONFIGDIR": "/tmp/matplotlib", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}


def command(workdir: Path | None, uid: int | None, sandboxed: bool, filter_fd: int = -1,
            processes: int = cgroups.FALLBACK_PROCESSES) -> tuple[list[str], list[str], dict | None]:
    """How to start the driver: (bwrap options, program, environment).

    In the sandbox the driver's work folder is ``/sandbox``, a size-limited tmpfs of its own holding a
    read-only copy of the driver; without the sandbox it is ``workdir``, a folder of the host. ``uid``
    is the submission's own uid when the grader is root (None otherwise); ``filter_fd`` is a descriptor
    holding the seccomp program, which bwrap installs last, just before the program starts. Without a uid
    of its own, the driver starts under ``prlimit`` with at most ``processes`` tasks: set inside the
    sandbox's user namespace, the kernel counts that limit against the namespace's own tasks only (its
    ucounts), not against every task of the grader's uid, whatever else that user runs meanwhile.

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
    if filter_fd >= 0:
        args += ["--seccomp", str(filter_fd)]
    program = [python, DRIVER.name]
    if uid is not None:
        program[:0] = ["/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                       "--bounding-set=-all", "--inh-caps=-all", "--no-new-privs"]
    else:
        args[:0] = ["--unshare-user", "--cap-drop", "ALL"]
        program[:0] = ["/usr/bin/prlimit", f"--nproc={processes}:{processes}", "--"]
    return args, program, None


def spawn(options: list[str], program: list[str], keep_fds: tuple[int, ...] = (), **popen) -> subprocess.Popen:
    """Start ``program`` under bwrap with ``options`` (or alone when there are none).

    ``keep_fds`` are descriptors the options name (the seccomp program's), passed on to bwrap.
    """
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
        return subprocess.Popen([bwrap, "--args", str(read), "--", *program], pass_fds=(read, *keep_fds), **popen)
    finally:
        os.close(read)
        if write >= 0:
            os.close(write)


def _limits(cpu_seconds: float, sandboxed: bool, caps: cgroups.Plan | None, join: list[str]):
    """What the child does before it becomes bwrap (or the driver); everything inside inherits it.

    It leaves the grader's session (and its session key ring), joins the sandbox's control groups
    (``join``: their ``cgroup.procs`` files), and sets its limits. The process limit counts every task of
    the sandbox's uid: as root each submission has a uid of its own, so it may hold ``caps.processes``.
    As another user the sandbox shares the grader's uid, whose count holds whatever else that user runs
    (a grader's threads, another grader): the limit is set inside the sandbox's user namespace instead
    (:func:`command`), where the kernel counts the namespace's tasks alone.
    """
    if sandboxed:
        processes = caps.processes if os.geteuid() == 0 else None
        address_space = caps.address_space
    else:
        processes, address_space = None, cgroups.MEMORY_BYTES

    def apply() -> None:
        os.setsid()  # its own process group: the grader stops the whole group
        if sandboxed:
            traces.join_new_session_keyring()
            for procs in join:
                with open(procs, "w") as handle:
                    handle.write(str(os.getpid()))
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
        cpu = int(cpu_seconds) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_BYTES, FILE_BYTES))
        resource.setrlimit(resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if processes is not None:
            resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
    return apply


def filter_program() -> bytes:
    """The seccomp program, or a SandboxError saying what to install."""
    try:
        return seccomp.program()
    except (ImportError, OSError) as error:
        raise SandboxError(f"the seccomp filter cannot be built ({type(error).__name__}: {error}); "
                           f"install it: {SECCOMP_HINT}") from None


class Session:
    """One running driver (in its sandbox) for one submission; restarted when it dies or hangs.

    Every start of one session runs under the same uid (leased at the first start, as root) and in the
    same control group; :meth:`close` ends it, checks what it left on the host and returns what had to be
    cleaned, in words.
    """

    def __init__(self, sandboxed: bool = True, cpu_seconds: float = 300, caps: cgroups.Plan | None = None,
                 uid: int | None = None):
        self.sandboxed, self.cpu_seconds = sandboxed, cpu_seconds
        self._given_uid = uid  # leased by the caller, who releases it
        self.caps = caps if caps is not None or not sandboxed else cgroups.plan()
        self.process: subprocess.Popen | None = None
        self.workdir: Path | None = None
        self.lease: traces.Lease | None = None
        self.group: cgroups.Group | None = None
        self.namespaces: set[str] = set()  # the PID namespaces of every start
        self._inits: list[int] = []  # each start's PID 1, as the host sees it
        self._seen = {"oom_kill": 0, "pids_max": 0}
        self._buffer = b""

    @property
    def uid(self) -> int | None:
        """The submission's uid (as root), or None: graded as another user, the grader's own."""
        if self._given_uid is not None:
            return self._given_uid
        return self.lease.uid if self.lease is not None else None

    def start(self) -> None:
        self.stop()
        join: list[str] = []
        filter_fd = -1
        if self.sandboxed:
            if os.geteuid() == 0 and self.uid is None:
                self.lease = traces.lease_uid()
            if self.group is None and self.caps.parents:
                self.group = cgroups.Group(self.caps, f"{os.getpid()}-{id(self):x}")
            join = self.group.join_files() if self.group else []
            filter_fd = seccomp.readable_fd(filter_program())
        else:
            self.workdir = Path(tempfile.mkdtemp(prefix="unsafe-grading-"))
            shutil.copy(DRIVER, self.workdir / DRIVER.name)
        try:
            options, program, env = command(self.workdir, self.uid, self.sandboxed, filter_fd,
                                            self.caps.processes if self.caps else cgroups.FALLBACK_PROCESSES)
            self.process = spawn(options, program, (filter_fd,) if filter_fd >= 0 else (), stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=self.workdir or "/",
                                 env=env, preexec_fn=_limits(self.cpu_seconds, self.sandboxed, self.caps, join))
        finally:
            if filter_fd >= 0:
                os.close(filter_fd)
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
        if self.sandboxed:  # bwrap's child is the sandbox's PID 1: its namespace holds every process inside
            for child in traces.children_of(self.process.pid):
                self._inits.append(child)
                namespace = traces.namespace_of(child)
                if namespace is not None:
                    self.namespaces.add(namespace)

    def new_events(self) -> dict[str, int]:
        """Since the last call: processes the kernel stopped at the memory cap, processes refused at the cap."""
        if self.group is None:
            return {"oom_kill": 0, "pids_max": 0}
        now = self.group.events()
        new = {key: now[key] - self._seen[key] for key in now}
        self._seen = now
        return new

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
        for init in self._inits:  # bwrap's death kills it (--die-with-parent); its exit ends the namespace
            try:
                os.kill(init, signal.SIGKILL)
            except ProcessLookupError:
                pass
        traces.wait_for_exit(self._inits)
        self._inits = []
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None

    def close(self) -> list[str]:
        """Stop the sandbox for good; what its uid, namespaces and group still held and had to be removed.

        An empty list is the normal outcome: the sandbox left nothing on the host.
        """
        self.stop()
        cleaned = []
        if self.group is not None:
            left = self.group.remove()
            if left:
                cleaned.append(f"{len(left)} process(es) still in the sandbox's control group")
            self.group = None
        if self.sandboxed:
            cleaned += traces.clean(traces.leftovers(self.uid, self.namespaces))
        if self.lease is not None:
            self.lease.release()
            self.lease = None
        return cleaned


PROBE = """
import json, os
import numpy, attnbook
status = dict(line.split(":", 1) for line in open("/proc/self/status") if ":" in line)
answer = {"pid": os.getpid(), "uid": os.getuid(), "env": sorted(os.environ), "seccomp": status["Seccomp"].strip(),
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
    lease = traces.lease_uid() if os.geteuid() == 0 else None
    filter_fd = seccomp.readable_fd(filter_program())
    caps = cgroups.plan()
    try:
        options, program, _ = command(None, lease.uid if lease else None, True, filter_fd, caps.processes)
        program = program[:-1] + ["-c", PROBE % (exercises, package)]
        try:
            process = spawn(options, program, (filter_fd,), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, preexec_fn=_limits(30, True, caps, []))
        finally:
            os.close(filter_fd)
        try:
            stdout, stderr = process.communicate(timeout=START_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # bwrap and, with it, the sandbox
            process.communicate()
            raise SandboxError(f"the sandbox probe did not finish in {START_TIMEOUT_S} s") from None
    except OSError as error:
        raise SandboxError(f"the sandbox did not start ({type(error).__name__}: {error})") from None
    finally:
        if lease is not None:
            traces.clean(traces.leftovers(lease.uid))
            lease.release()
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
    if seen["seccomp"] != "2":
        wrong.append(f"the probe ran without its seccomp filter (Seccomp: {seen['seccomp']})")
    if wrong:
        raise SandboxError("; ".join(wrong))
    return seen
