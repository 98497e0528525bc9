"""Memory, processes and CPU capped per sandbox: a control group per sandbox where the machine allows it.

A resource limit (``setrlimit``) holds per process, so a sandbox of 64 processes of 3 GiB each could take
192 GiB. A control group counts every process of the sandbox together: the kernel refuses more processes
than ``pids.max`` and, past the memory cap, its out-of-memory killer stops a process *of that group*, never
the grader or another student's sandbox. :func:`plan` chooses, in this order:

- **cgroup v2**: the unified hierarchy with the ``memory`` and ``pids`` controllers (and ``cpu`` where it
  is there), in the folder ``ATTNBOOK_CGROUP`` names (a subtree delegated to the grader's user, which must
  hold no process itself: run the grader in a child of it), or, as root, ``attnbook-grading`` under the
  hierarchy's root;
- **cgroup v1**: as root, the ``memory`` and ``pids`` hierarchies (and ``cpu`` where it is mounted), in
  ``attnbook-grading`` under the grader's own groups;
- **resource limits** otherwise (a user without a delegated subtree, a container that hides the groups):
  :data:`FALLBACK_PROCESSES` processes of ``memory / FALLBACK_PROCESSES`` address space each, so that their
  product is the same cap. The process count is per uid: as root each sandbox has a uid of its own; graded
  as another user, the limit is set inside the sandbox's user namespace, where the kernel counts its tasks alone.

Either way a process's address space is at most the sandbox's cap, so one allocation beyond it fails
with ``MemoryError`` in the student's own cell, and only many processes together meet the group's cap.

**CPU.** The scheduler shares the CPU between sessions (autogroups), so sixty children that each call
``setsid()`` would take sixty shares and leave the sandbox beside them a few percent: its cells time out.
With the ``cpu`` controller every process of a sandbox is in its group, whatever sessions it makes, and
each group gets the same weight (v2 ``cpu.weight`` :data:`CPU_WEIGHT`, v1 ``cpu.shares``
:data:`CPU_SHARES`) and at most one CPU (v2 ``cpu.max``, v1 ``cpu.cfs_quota_us`` over ``cpu.cfs_period_us``:
:data:`CPU_QUOTA_US` per :data:`CPU_PERIOD_US`; a sandbox's numerical libraries run one thread). Without
the controller (:attr:`Plan.why_not_cpu` says why) nothing keeps one sandbox from starving another, and
the grader runs the sandboxes one at a time. The folder that holds the sandboxes' groups (as root) weighs
one share per CPU of the machine: beside other work the sandboxes together get what as many busy sessions
would, as they did when each was a session of its own.
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field
from pathlib import Path

from tools.homework.traces import wait_for_exit

MEMORY_BYTES = 3 * 1024 ** 3  # one sandbox, all its processes together
PROCESSES = 64  # a sandbox's processes and threads, with a control group
FALLBACK_PROCESSES = 6  # without one: the driver's two threads and a few children
GRADER_RESERVE_BYTES = 1024 ** 3  # the grader, its workers and the system, beside the sandboxes
GROUP = "attnbook-grading"
CPU_WEIGHT = 100  # v2 cpu.weight: the same for every sandbox (100 is the kernel's default)
CPU_SHARES = 1024  # v1 cpu.shares: the same for every sandbox (1024 is the kernel's default)
CPU_PERIOD_US = 100_000
CPU_QUOTA_US = 100_000  # per period: one CPU per sandbox at most


@dataclass(frozen=True)
class Plan:
    """How every sandbox of a grading run is capped (see the module's docstring)."""

    kind: str  # "cgroup v2", "cgroup v1" or "resource limits"
    memory_bytes: int  # every process of one sandbox together
    processes: int
    address_space: int  # RLIMIT_AS of each process
    parents: dict[str, Path] = field(default_factory=dict)  # controller -> folder where groups are made
    why_not_cgroup: str = ""
    why_not_cpu: str = ""  # without the cpu controller: why not

    @property
    def cpu(self) -> bool:
        """Whether each sandbox gets an equal share of the CPU and at most one CPU (the ``cpu`` controller)."""
        return "cpu" in self.parents

    def describe(self) -> str:
        """The caps in words, for the grader's output and the feedback."""
        gib = self.memory_bytes / 1024 ** 3
        if self.kind == "resource limits":
            return (f"{gib:g} GiB per sandbox as {self.processes} processes of at most "
                    f"{self.address_space / 1024 ** 2:.0f} MiB (resource limits: {self.why_not_cgroup})")
        cpu = (f"an equal share of the CPU, at most {CPU_QUOTA_US / CPU_PERIOD_US:g} CPU each" if self.cpu else
               f"no CPU share: {self.why_not_cpu}")
        return f"{gib:g} GiB and {self.processes} processes per sandbox ({self.kind}), {cpu}"


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, file system type, super options) of every cgroup mount (``/proc/self/mountinfo``)."""
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        separator = fields.index("-")
        kind = fields[separator + 1]
        if kind in ("cgroup", "cgroup2"):
            found.append((fields[4], kind, set(fields[separator + 3].split(","))))
    return found


def _own_groups() -> dict[str, str]:
    """Controller (or ``""`` for v2) -> this process's group path (``/proc/self/cgroup``)."""
    groups = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            groups[controller] = path
    return groups


def _weigh_folder(folder: Path, v1: bool) -> None:
    """Give the sandboxes' folder one share per CPU: together they weigh what as many busy sessions would."""
    cpus = os.cpu_count() or 1
    name, value = ("cpu.shares", CPU_SHARES * cpus) if v1 else ("cpu.weight", min(10_000, CPU_WEIGHT * cpus))
    try:
        (folder / name).write_text(str(value))
    except OSError:  # the folder keeps the kernel's default weight: the sandboxes are slower beside other work
        pass


def _usable(parent: Path) -> bool:
    """Whether groups can be made in ``parent`` (made if missing): a probe group made and removed."""
    probe = parent / f"probe-{os.getpid()}"
    try:
        parent.mkdir(exist_ok=True)
        probe.mkdir()
        probe.rmdir()
        return True
    except OSError:
        return False


def _v2_parent(mount: Path) -> tuple[Path | None, str, set[str]]:
    """(folder for the sandboxes' groups or None, why not, the controllers it enables for them)."""
    delegated = os.environ.get("ATTNBOOK_CGROUP")
    if delegated:
        parent = Path(delegated)
        enabled = set((parent / "cgroup.subtree_control").read_text().split()) if parent.is_dir() else set()
        if not {"memory", "pids"} <= enabled:
            return None, f"ATTNBOOK_CGROUP={delegated} does not enable memory and pids for its children", set()
        if not _usable(parent):
            return None, f"cannot make groups in ATTNBOOK_CGROUP={delegated}", set()
        return parent, "", enabled & {"memory", "pids", "cpu"}
    if os.geteuid() != 0:
        return None, "not root, and no delegated subtree named by ATTNBOOK_CGROUP", set()
    available = set((mount / "cgroup.controllers").read_text().split())
    if not {"memory", "pids"} <= available:
        return None, "the unified hierarchy has no memory and pids controllers", set()
    parent = mount / GROUP
    wanted = ["memory", "pids", "cpu"] if "cpu" in available else ["memory", "pids"]
    while True:
        try:
            for folder in (mount, parent):  # the root enables them for our folder, our folder for the sandboxes
                folder.mkdir(exist_ok=True)
                (folder / "cgroup.subtree_control").write_text(" ".join(f"+{name}" for name in wanted))
            break
        except OSError as error:
            if "cpu" not in wanted:
                return None, f"cannot enable memory and pids in {parent} ({error.strerror})", set()
            wanted.remove("cpu")  # (a real-time process outside a group, say): memory and pids without it
    if not _usable(parent):
        return None, f"cannot make groups in {parent}", set()
    if "cpu" in wanted:
        _weigh_folder(parent, v1=False)
    return parent, "", set(wanted)


def plan(memory_bytes: int = MEMORY_BYTES) -> Plan:
    """The caps every sandbox gets on this machine, by the first way that works (module docstring)."""
    mounts = _mounts()
    reasons = []
    for point, kind, options in mounts:
        if kind == "cgroup2" and (Path(point) / "cgroup.controllers").exists():
            parent, why, enabled = _v2_parent(Path(point))
            if parent is not None:
                return Plan("cgroup v2", memory_bytes, PROCESSES, memory_bytes,
                            {name: parent for name in sorted(enabled)},
                            why_not_cpu="" if "cpu" in enabled else f"{parent} does not enable the cpu controller")
            reasons.append(why)
    v1 = {controller: point for point, kind, options in mounts if kind == "cgroup"
          for controller in ("memory", "pids", "cpu") if controller in options}
    if {"memory", "pids"} <= set(v1):
        if os.geteuid() == 0:
            own = _own_groups()
            parents = {name: Path(v1[name]) / own.get(name, "/").lstrip("/") / GROUP for name in v1}
            if all(_usable(parents[name]) for name in ("memory", "pids")):
                why_not_cpu = ""
                if "cpu" not in parents:
                    why_not_cpu = "no cpu hierarchy is mounted"
                elif not _usable(parents["cpu"]):
                    why_not_cpu = f"cannot make groups in {parents.pop('cpu')}"
                else:
                    _weigh_folder(parents["cpu"], v1=True)
                return Plan("cgroup v1", memory_bytes, PROCESSES, memory_bytes, parents, why_not_cpu=why_not_cpu)
            reasons.append("cannot make groups in the memory and pids hierarchies")
        else:
            reasons.append("cgroup v1 needs root")
    elif not mounts:
        reasons.append("no control groups are mounted")
    return fallback(memory_bytes, "; ".join(dict.fromkeys(reasons)) or "no memory and pids controllers")


def fallback(memory_bytes: int, why: str) -> Plan:
    """Caps by resource limits alone: processes times address space is the cap; ``why`` no group is used."""
    return Plan("resource limits", memory_bytes, FALLBACK_PROCESSES, memory_bytes // FALLBACK_PROCESSES,
                why_not_cgroup=why, why_not_cpu=f"no control group: {why}")


def machine_memory() -> int:
    """The memory the grader may use: the machine's, or its own control group's limit when smaller."""
    total = next(int(line.split()[1]) * 1024 for line in Path("/proc/meminfo").read_text().splitlines()
                 if line.startswith("MemTotal:"))
    own = _own_groups()
    for point, kind, options in _mounts():
        if kind == "cgroup2" and "" in own:
            limit_file = Path(point) / own[""].lstrip("/") / "memory.max"
        elif kind == "cgroup" and "memory" in options:
            limit_file = Path(point) / own.get("memory", "/").lstrip("/") / "memory.limit_in_bytes"
        else:
            continue
        try:
            text = limit_file.read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
    return total


def needed_bytes(jobs: int, caps: Plan) -> int:
    """What ``jobs`` sandboxes at once may take at their caps, with the grader's own reserve."""
    return jobs * caps.memory_bytes + GRADER_RESERVE_BYTES


class Group:
    """One sandbox's control group (or groups, one per v1 hierarchy): made with its caps, removed after."""

    def __init__(self, caps: Plan, name: str):
        self.caps = caps
        self.folders = {controller: parent / name for controller, parent in caps.parents.items()}
        v1 = caps.kind == "cgroup v1"
        limits = {"memory": [("memory.swappiness", 0), ("memory.limit_in_bytes", caps.memory_bytes),
                             ("memory.memsw.limit_in_bytes", caps.memory_bytes)] if v1 else
                  [("memory.max", caps.memory_bytes), ("memory.swap.max", 0)],
                  "pids": [("pids.max", caps.processes)],
                  "cpu": [("cpu.shares", CPU_SHARES), ("cpu.cfs_period_us", CPU_PERIOD_US),
                          ("cpu.cfs_quota_us", CPU_QUOTA_US)] if v1 else
                  [("cpu.weight", CPU_WEIGHT), ("cpu.max", f"{CPU_QUOTA_US} {CPU_PERIOD_US}")]}
        for controller, folder in self.folders.items():
            folder.mkdir(exist_ok=True)
            for file_name, value in limits[controller]:
                # memsw and swap.max exist only where swap is accounted; where it is not, a v1 group's
                # swappiness 0 still keeps its pages out of swap when it meets its cap
                if (folder / file_name).exists():
                    (folder / file_name).write_text(str(value))

    def join_files(self) -> list[str]:
        """The ``cgroup.procs`` files a new process writes its pid to, once per distinct folder."""
        return sorted({str(folder / "cgroup.procs") for folder in self.folders.values()})

    def _counter(self, controller: str, file_name: str, key: str) -> int:
        try:
            text = (self.folders[controller] / file_name).read_text()
        except (OSError, KeyError):
            return 0
        values = dict(line.split()[:2] for line in text.splitlines() if len(line.split()) >= 2)
        return int(values.get(key, 0))

    def events(self) -> dict[str, int]:
        """How often the kernel stopped a process at the memory cap, and refused a process at ``pids.max``."""
        oom_file = "memory.oom_control" if self.caps.kind == "cgroup v1" else "memory.events"
        return {"oom_kill": self._counter("memory", oom_file, "oom_kill"),
                "pids_max": self._counter("pids", "pids.events", "max")}

    def members(self) -> list[int]:
        pids = set()
        for file_name in self.join_files():
            try:
                pids |= {int(p) for p in Path(file_name).read_text().split()}
            except OSError:
                continue
        return sorted(pids)

    def remove(self) -> list[int]:
        """Kill what is still in the group, remove it; returns the processes that had to be killed."""
        left = self.members()
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        wait_for_exit(left)
        for folder in self.folders.values():
            try:
                folder.rmdir()
            except OSError:  # a process that would not die: the group stays, and the leftovers check says so
                pass
        return left
