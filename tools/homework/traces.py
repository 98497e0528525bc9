"""Who a sandbox runs as, and what it left behind: a fresh uid per submission, checked and cleaned after it.

As root the grader runs each submission under a uid of its own (:func:`lease_uid`): uids are handed out
in turn from a range no account uses (:func:`uid_range`: from :data:`BASE_UID`, or from
``ATTNBOOK_SANDBOX_UIDS`` where that range is taken on the machine), never reused while another grader on
the machine holds one (a lock file per uid), and the next uid comes from a counter shared by every run, so
two submissions, in one run or in two, get two uids until the range wraps around. After the submission
:func:`leftovers` lists what the uid still owns on the host and :func:`clean` removes it:

- processes of the uid, or in the sandbox's PID namespace (killed);
- keys: what the uid's user, user-session and persistent key rings hold (cleared by a short-lived child
  that takes the uid, since only a possessor of a key ring can read or clear it);
- System V IPC objects in the host's namespace (removed);
- files and folders at the top of the host's world-writable folders (:data:`SHARED_FOLDERS`, removed).

The sandbox is built so that none of these can happen (its seccomp filter refuses the key calls, its
IPC and PID namespaces are its own, its file system is read-only but for two in-memory folders): the
check is there to prove it for every submission, and to clean up and say so if a sandbox ever leaks.

Graded as another user, the sandboxes run under the grader's own uid in user namespaces, so only the
processes of a sandbox's PID namespace can be told apart from the grader's own; its key rings (a user
namespace has its own user key rings, and each sandbox starts in a new session key ring), IPC objects
and files die with its namespaces.
"""

from __future__ import annotations

import ctypes
import fcntl
import functools
import os
import select
import shutil
import signal
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

BASE_UID = 1_200_000  # sandbox uids when grading as root: no account uses them
UID_COUNT = 1_000_000  # the range's size: a million submissions before a uid comes round again
LEASES = Path(tempfile.gettempdir()) / "attnbook-grading-uids"  # root's lock files and counters
SHARED_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock")
EXIT_BOUND_S = 10  # a killed process is gone well within this, even on a busy machine

# linux/keyctl.h
KEYCTL_GET_KEYRING_ID, KEYCTL_JOIN_SESSION_KEYRING, KEYCTL_CLEAR, KEYCTL_READ = 0, 1, 7, 11
KEYCTL_GET_PERSISTENT = 22
KEY_SPEC_PROCESS_KEYRING, KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING = -2, -4, -5
SYS_KEYCTL = {"x86_64": 250, "aarch64": 219}
IPC_RMID = 0


# --- uids --------------------------------------------------------------------------------------------


@dataclass
class Lease:
    """A uid held by one submission until :meth:`release`; its lock file is held open meanwhile."""

    uid: int
    _lock: int

    def release(self) -> None:
        """Give the uid back: its lock file goes (while still locked, so nobody takes it meanwhile)."""
        if self._lock >= 0:
            try:
                os.unlink(LEASES / str(self.uid))
            except FileNotFoundError:
                pass
            os.close(self._lock)
            self._lock = -1


def _locked(path: Path, blocking: bool) -> int | None:
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except BlockingIOError:
        os.close(descriptor)
        return None
    return descriptor


def uid_range() -> range:
    """The sandbox uids: :data:`UID_COUNT` from :data:`BASE_UID`, or from ``ATTNBOOK_SANDBOX_UIDS`` when set."""
    text = os.environ.get("ATTNBOOK_SANDBOX_UIDS", "")
    base = int(text) if text.isdigit() and 1000 <= int(text) <= 2 ** 32 - 2 - UID_COUNT else BASE_UID
    if text and base == BASE_UID and text != str(BASE_UID):
        raise ValueError(f"ATTNBOOK_SANDBOX_UIDS must be the first uid of a free range of {UID_COUNT}, got {text!r}")
    return range(base, base + UID_COUNT)


def lease_uid() -> Lease:
    """The next free sandbox uid (root only): not held by another grader, and owning nothing on the host.

    A uid that still owns something (a grader that was killed before it cleaned) is cleaned first.
    """
    uids = uid_range()
    LEASES.mkdir(mode=0o700, exist_ok=True)
    counter = _locked(LEASES / f"next-{uids.start}", blocking=True)
    try:
        text = os.pread(counter, 32, 0).decode().strip()
        start = int(text) if text.isdigit() else 0
        for step in range(UID_COUNT):
            offset = (start + step) % UID_COUNT
            lock = _locked(LEASES / f"{uids[offset]}", blocking=False)
            if lock is None:
                continue  # held by a submission being graded now
            os.ftruncate(counter, 0)
            os.pwrite(counter, str((offset + 1) % UID_COUNT).encode(), 0)
            lease = Lease(uids[offset], lock)
            clean(leftovers(lease.uid))
            return lease
        raise RuntimeError(f"all {UID_COUNT} sandbox uids are in use")
    finally:
        os.close(counter)


# --- what a sandbox may have left ----------------------------------------------------------------------


@dataclass
class Leftovers:
    """What a finished sandbox's uid (or PID namespace) still owns on the host."""

    uid: int | None
    processes: list[int]
    keys: int
    ipc: list[tuple[str, int]]  # (kind: shm, sem or msg; id)
    files: list[str]

    def __bool__(self) -> bool:
        return bool(self.processes or self.keys or self.ipc or self.files)

    def describe(self) -> list[str]:
        """What was found, in words (for the feedback and grades.csv)."""
        said = []
        if self.processes:
            said.append(f"{len(self.processes)} process(es) still running")
        if self.keys:
            said.append(f"{self.keys} key(s) in the kernel's key rings")
        if self.ipc:
            said.append(f"{len(self.ipc)} System V IPC object(s)")
        if self.files:
            said.append(f"{len(self.files)} file(s) in shared folders ({', '.join(self.files[:3])})")
        return said


def namespace_of(pid: int) -> str | None:
    """The PID namespace of a process (``pid:[inode]``), or None when it is gone or out of reach."""
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def children_of(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except (OSError, ValueError):
        return []


def _status(pid: str) -> dict[str, str]:
    return dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)


def processes(uid: int | None, namespaces: set[str]) -> list[int]:
    """Live processes with ``uid`` as a real, effective, saved or file-system uid, or in one of ``namespaces``.

    A zombie (an ended process its parent has not yet reaped) holds nothing and is not counted.
    """
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            status = _status(entry.name)
            if status["State"].split()[0] in ("Z", "X"):
                continue
            uids = {int(value) for value in status["Uid"].split()}
            if (uid is not None and uid in uids) or namespace_of(int(entry.name)) in namespaces:
                found.append(int(entry.name))
        except (OSError, KeyError, ValueError):  # ended while we looked
            continue
    return found


def _key_users() -> dict[int, int]:
    """uid -> how many keys it owns, key rings included (``/proc/key-users``)."""
    counts = {}
    try:
        for line in Path("/proc/key-users").read_text().splitlines():
            uid, _, rest = line.partition(":")
            counts[int(uid)] = int(rest.split()[1].split("/")[0])
    except (OSError, ValueError, IndexError):
        pass
    return counts


def _as_uid(uid: int, action) -> int:
    """Run ``action()`` (returning a small int) in a forked child that has taken ``uid``; its result."""
    _keyctl()  # loaded before the fork: the child only makes system calls
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: take the uid, act, report, exit without cleaning up the parent's state
        code = 0
        try:
            os.close(read)
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            os.write(write, str(action()).encode())
        except BaseException:  # noqa: BLE001 - report nothing: the parent reads no number
            code = 1
        os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as handle:
        said = handle.read()
    os.waitpid(pid, 0)
    return int(said) if said.strip().isdigit() else -1


@functools.cache
def _keyctl():
    """The ``keyctl`` system call (no library wraps it), or None on an architecture not listed here."""
    libc = ctypes.CDLL(None, use_errno=True)
    number = SYS_KEYCTL.get(os.uname().machine)
    if number is None:
        return None

    def keyctl(*args) -> int:
        return libc.syscall(ctypes.c_long(number), *(ctypes.c_long(a) for a in args))
    return keyctl


def _clear_own_keys(clear: bool) -> int:
    """In a child that has taken a sandbox uid: count (and clear) the keys its key rings hold.

    The user-session ring holds a link to the user ring; the rings themselves are not counted.
    """
    keyctl = _keyctl()
    if keyctl is None:
        return 0
    rings = []
    for spec in (KEY_SPEC_USER_KEYRING, KEY_SPEC_USER_SESSION_KEYRING):
        ring = keyctl(KEYCTL_GET_KEYRING_ID, spec, 0)  # 0: do not create it
        if ring > 0:
            rings.append(ring)
    persistent = keyctl(KEYCTL_GET_PERSISTENT, -1, KEY_SPEC_PROCESS_KEYRING)
    if persistent > 0:
        rings.append(persistent)
    held = set()
    for ring in rings:
        buffer = (ctypes.c_int32 * 4096)()
        size = keyctl(KEYCTL_READ, ring, ctypes.addressof(buffer), ctypes.sizeof(buffer))
        held |= set(buffer[:max(size, 0) // 4]) - set(rings)
        if clear and size > 0:
            keyctl(KEYCTL_CLEAR, ring)
    return len(held)


def _ipc_objects(uid: int) -> list[tuple[str, int]]:
    found = []
    for kind in ("shm", "sem", "msg"):
        try:
            lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        except OSError:
            continue
        header = lines[0].split() if lines else []
        for line in lines[1:]:
            fields = dict(zip(header, line.split()))
            if str(uid) in (fields.get("uid"), fields.get("cuid")):
                found.append((kind, int(fields[{"shm": "shmid", "sem": "semid", "msg": "msqid"}[kind]])))
    return found


def _shared_files(uid: int) -> list[str]:
    found = []
    for folder in SHARED_FOLDERS:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid == uid:
                    found.append(entry.path)
            except OSError:
                continue
    return found


def leftovers(uid: int | None, namespaces: set[str] = frozenset()) -> Leftovers:
    """What ``uid`` (root's sandbox uid; None when grading as another user) and ``namespaces`` still own."""
    found = Leftovers(uid, processes(uid, set(namespaces)), 0, [], [])
    if uid is not None:
        if _key_users().get(uid, 0):
            found.keys = max(_as_uid(uid, lambda: _clear_own_keys(clear=False)), 0)
        found.ipc = _ipc_objects(uid)
        found.files = _shared_files(uid)
    return found


def wait_for_exit(pids: list[int], bound_s: float = EXIT_BOUND_S) -> list[int]:
    """Wait until each process has exited (its pidfd says so), at most ``bound_s``; those still running."""
    running = []
    for pid in pids:
        try:
            descriptor = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
        try:
            if not select.select([descriptor], [], [], bound_s)[0]:
                running.append(pid)
        finally:
            os.close(descriptor)
    return running


def clean(found: Leftovers) -> list[str]:
    """Remove what :func:`leftovers` found; returns what had to be removed, in words (empty if nothing)."""
    if not found:
        return []
    for pid in found.processes:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    still = wait_for_exit(found.processes)
    if found.keys:
        _as_uid(found.uid, lambda: _clear_own_keys(clear=True))
    libc = ctypes.CDLL(None, use_errno=True)
    for kind, identifier in found.ipc:
        if kind == "shm":
            libc.shmctl(identifier, IPC_RMID, None)
        elif kind == "sem":
            libc.semctl(identifier, 0, IPC_RMID)
        else:
            libc.msgctl(identifier, IPC_RMID, None)
    for path in found.files:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
    said = found.describe()
    if still:
        said.append(f"{len(still)} process(es) that SIGKILL did not end within {EXIT_BOUND_S} s")
    return said


def join_new_session_keyring() -> None:
    """Give the calling process a new, empty session key ring (called before the sandbox starts).

    Each sandbox then shares no key ring with the grader or another sandbox, even where the seccomp
    filter could not be installed; the ring is freed with its last process.
    """
    keyctl = _keyctl()
    if keyctl is not None:
        keyctl(KEYCTL_JOIN_SESSION_KEYRING, 0)
