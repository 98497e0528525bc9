"""The seccomp filter every grading sandbox runs under: the system calls a notebook never needs are refused.

bubblewrap installs the filter (``--seccomp FD``) as the last step before it starts the sandbox's program,
so it holds for every process of the submission and cannot be removed (a process may only add filters,
which can refuse more, never less). It is built with libseccomp through ``pyseccomp`` (PyPI, a ctypes
binding with the API of libseccomp's own Python module; it needs only ``libseccomp.so.2``, which every
Debian system has because apt depends on it).

The filter is a deny list: everything a notebook does (files in its sandbox, threads, ``fork``,
``subprocess``, ``multiprocessing``) stays allowed, and whole classes of calls that reach state outside
the sandbox are refused with ``EPERM``, as if the caller had no right to them (:data:`REFUSED` says why
each class is there). Two details make the list hold by class and not only by name:

- ``clone`` is refused whenever its flags ask for a new namespace of any kind, and ``clone3`` (whose
  flags sit in memory, out of the filter's reach) answers ``ENOSYS``, so that the C library falls back
  to ``clone`` for threads and processes.
- System calls newer than the ones libseccomp knows (numbers above its table, up to
  :data:`LAST_NUMBER`) answer ``ENOSYS``, as on an older kernel: a new call is refused until a
  libseccomp that knows it is installed and it is judged here.

Sockets are the one allow list: ``socket`` and ``socketpair`` open only the families of
:data:`SOCKET_FAMILIES` and answer ``EAFNOSUPPORT`` (as a kernel built without the family) for every
other; a netlink socket opens only the protocols of :data:`NETLINK_PROTOCOLS` and answers
``EPROTONOSUPPORT`` otherwise. An empty network namespace does not make the others harmless: a vsock
socket reaches the host of a virtual machine through no network at all, a packet or a netlink socket of
another protocol talks to the kernel's own subsystems. The driver talks to the grader over its standard
input and output (no ZMQ, no TCP), and nothing a homework imports opens an internet socket, so ``AF_INET``
and ``AF_INET6`` are refused too.

Calls of another architecture (32-bit ``int 0x80`` calls, x32) kill the process: that is libseccomp's
action for a foreign architecture, and the filter keeps it.
"""

from __future__ import annotations

import errno
import functools
import os
import tempfile

# class of state -> (why a notebook never needs it, the system calls)
REFUSED: dict[str, tuple[str, tuple[str, ...]]] = {
    "keyring": ("the kernel's key rings belong to a uid and outlive every process: a submission could leave "
                "data there for a later one (the attack of issue #29)",
                ("add_key", "request_key", "keyctl")),
    "namespaces": ("new namespaces (a user namespace above all) would give the submission capabilities over "
                   "a world of its own, and entering another one would leave the sandbox",
                   ("unshare", "setns")),
    "tracing": ("reading or writing another process's memory or descriptors",
                ("ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd", "process_madvise")),
    "kernel programs": ("code run inside the kernel, and kernel measurements that leak what other processes do",
                        ("bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
                         "io_uring_register")),
    "mounts": ("changing what the file system looks like",
               ("mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig",
                "fsmount", "fspick", "mount_setattr", "quotactl", "quotactl_fd", "swapon", "swapoff")),
    "files by handle": ("opening a file by its handle skips the path, and with it the sandbox's view of the "
                        "file system", ("name_to_handle_at", "open_by_handle_at", "fanotify_init")),
    "kernel modules": ("loading code into the kernel, or another kernel",
                       ("init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load")),
    "the machine": ("the clock, the host's name, the power switch, the kernel log and its accounting",
                    ("reboot", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname",
                     "setdomainname", "syslog", "acct", "iopl", "ioperm", "vhangup", "lookup_dcookie",
                     "uselib", "personality")),
}

# clone's flags that make a namespace (linux/sched.h): any of them makes clone refuse
NAMESPACE_FLAGS = {"CLONE_NEWNS": 0x00020000, "CLONE_NEWCGROUP": 0x02000000, "CLONE_NEWUTS": 0x04000000,
                   "CLONE_NEWIPC": 0x08000000, "CLONE_NEWUSER": 0x10000000, "CLONE_NEWPID": 0x20000000,
                   "CLONE_NEWNET": 0x40000000, "CLONE_NEWTIME": 0x00000080}
LAST_NUMBER = 1023  # numbers above libseccomp's table and up to this one answer ENOSYS

# the socket families a sandbox may open (linux/socket.h) -> (number, why a notebook needs it)
SOCKET_FAMILIES: dict[str, tuple[int, str]] = {
    "AF_UNIX": (1, "local sockets within the sandbox: multiprocessing's pipes and connections, asyncio's "
                   "wake-up socket pair; the abstract names are the sandbox's own, per network namespace"),
    "AF_NETLINK": (16, "the C library asks the kernel for the network interfaces (getaddrinfo with "
                       "AI_ADDRCONFIG, if_nameindex, getifaddrs) over a routing netlink socket: in the empty "
                       "network namespace it sees only the loopback interface"),
}
# the netlink protocols a sandbox may open (linux/netlink.h): the C library's only one
NETLINK_PROTOCOLS: dict[str, int] = {"NETLINK_ROUTE": 0}
AF_NETLINK = SOCKET_FAMILIES["AF_NETLINK"][0]


def refused_calls() -> list[str]:
    """Every system call the filter refuses by name, in the order of :data:`REFUSED`."""
    return [name for _, names in REFUSED.values() for name in names]


@functools.cache
def program(refusal: int = errno.EPERM, family_refusal: int = errno.EAFNOSUPPORT,
            protocol_refusal: int = errno.EPROTONOSUPPORT) -> bytes:
    """The filter as a BPF program (what ``bwrap --seccomp`` reads), refusing with errno ``refusal``.

    A socket family outside :data:`SOCKET_FAMILIES` is refused with ``family_refusal``, a netlink protocol
    outside :data:`NETLINK_PROTOCOLS` with ``protocol_refusal``.

    Raises ImportError when pyseccomp is missing and OSError when libseccomp cannot be loaded.
    """
    import pyseccomp as seccomp

    arch = seccomp.system_arch()
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in refused_calls():
        rules.add_rule(seccomp.ERRNO(refusal), name)
    for flag in NAMESPACE_FLAGS.values():
        rules.add_rule(seccomp.ERRNO(refusal), "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    unix = SOCKET_FAMILIES["AF_UNIX"][0]
    for name, families in (("socket", {number for number, _ in SOCKET_FAMILIES.values()}), ("socketpair", {unix})):
        for family in _outside(seccomp, 0, families):
            rules.add_rule(seccomp.ERRNO(family_refusal), name, family)
    for protocol in _outside(seccomp, 2, set(NETLINK_PROTOCOLS.values())):
        rules.add_rule(seccomp.ERRNO(protocol_refusal), "socket", seccomp.Arg(0, seccomp.EQ, AF_NETLINK), protocol)
    for number in range(_last_known(seccomp, arch) + 1, LAST_NUMBER + 1):
        rules.add_rule(seccomp.ERRNO(errno.ENOSYS), number)
    with tempfile.TemporaryFile() as handle:
        rules.export_bpf(handle)
        handle.seek(0)
        return handle.read()


def _outside(seccomp, index: int, allowed: set[int]) -> list:
    """Conditions on argument ``index``, one per rule, that together match every value not in ``allowed``.

    The whole 64-bit register is compared: a value with high bits set (which the kernel would drop from an
    ``int``) is above every allowed value, and refused.
    """
    below = [seccomp.Arg(index, seccomp.EQ, value) for value in range(max(allowed)) if value not in allowed]
    return [*below, seccomp.Arg(index, seccomp.GT, max(allowed))]


def _last_known(seccomp, arch: int) -> int:
    """The highest system call number libseccomp has a name for on ``arch``."""
    known = [number for number in range(LAST_NUMBER + 1) if _name(seccomp, arch, number)]
    return max(known)


def _name(seccomp, arch: int, number: int) -> str:
    try:
        name = seccomp.resolve_syscall(arch, number)
    except (OSError, ValueError):
        return ""
    return name.decode() if isinstance(name, bytes) else (name or "")


def install(data: bytes) -> None:
    """Put this process (and every child it makes from now on) under the BPF program ``data`` for good.

    What bwrap does with ``--seccomp``, without bwrap: ``no_new_privs``, then the filter (``prctl``); the
    tests load the program in a throwaway process this way. Raises OSError when the kernel refuses it.
    """
    import ctypes

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    program = Program(len(data) // 8, data)
    if libc.prctl(38, 1, 0, 0, 0) != 0 or libc.prctl(22, 2, ctypes.byref(program), 0, 0) != 0:  # NO_NEW_PRIVS, FILTER
        raise OSError(ctypes.get_errno(), "the seccomp filter could not be installed")


def readable_fd(data: bytes) -> int:
    """A descriptor from which ``data`` can be read to its end (a pipe holds the program: a few KiB)."""
    read, write = os.pipe()
    try:
        if len(data) > 60000:
            raise ValueError("the seccomp program is larger than a pipe holds")
        os.write(write, data)
    except BaseException:
        os.close(read)
        raise
    finally:
        os.close(write)
    return read
