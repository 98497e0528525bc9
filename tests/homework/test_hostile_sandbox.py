"""Hostile submissions against what the sandbox shares with its neighbours: the CPU and the kernel's sockets.

A submission whose children each call ``setsid()`` takes one scheduler share per session: without a CPU
share per sandbox it left an honest neighbour graded at the same time a few percent of the CPU, and its
cells timed out (issue #38). A submission that opens a vsock socket reaches the host of a virtual machine
through no network at all. The module grades such submissions as root with ``--jobs 2``, an honest student
graded before, beside and after them, and checks what each attack achieved (nothing); it also tests the
socket allow list in a throwaway process, the CPU files of each sandbox's group, and the grader's fallback
to one sandbox at a time without a CPU controller.
"""

from __future__ import annotations

import csv
import dataclasses
import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from tools.homework import cgroups, grading, sandbox, seccomp

HOMEWORK = "hw_scaled_dot_product_attention"
SAMPLES = Path(__file__).resolve().parent / "submissions" / HOMEWORK
TIMEOUT_S = 15
HOG_CHILDREN = 58  # with the driver and bwrap's init, just under the sandbox's 64 processes
HOG_CELLS, HOG_SLEEP_S = 9, 10  # the children spin while the hog's cells sleep: 90 s, beside three neighbours
RUN_BOUND_S = 900
HONEST = ("aaa_honest", "mmm_honest", "zzz_honest")  # before, beside and after the attacks, at --jobs 2
AF_VSOCK, AF_PACKET, NETLINK_SOCK_DIAG, NETLINK_KOBJECT_UEVENT = 40, 17, 4, 15

# Every child leaves the session (and the scheduler's group) of its parent and spins; nice 19 keeps the
# hog's own kernel answering inside its own share, and changes nothing for the neighbours without one
SPAWN_SPINNERS = textwrap.dedent(f'''
    import os
    started = 0
    for _ in range({HOG_CHILDREN}):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            os.setsid()
            os.nice(19)
            while True:
                pass
        started += 1
''')
SLEEP = f"import time\ntime.sleep({HOG_SLEEP_S})\n"
HOG_REPORT = '''def my_softmax(x):  # called by the hidden tests, long after the children started
    sessions = {os.getsid(int(pid)) for pid in os.listdir("/proc") if pid.isdigit() and pid != "1"}
    raise ValueError(f"HOG started:{started} sessions:{len(sessions)}")
'''

# each family or netlink protocol the allow list refuses, opened; the errno's name, or "opened"
OPEN_SOCKETS = textwrap.dedent(f'''
    import errno, socket

    def opens(*args):
        try:
            socket.socket(*args).close()
            return "opened"
        except OSError as error:
            return errno.errorcode.get(error.errno, str(error.errno))

    said = {{"vsock": opens({AF_VSOCK}, socket.SOCK_STREAM), "packet": opens({AF_PACKET}, socket.SOCK_DGRAM),
            "diag": opens(16, socket.SOCK_RAW, {NETLINK_SOCK_DIAG}),
            "uevent": opens(16, socket.SOCK_DGRAM, {NETLINK_KOBJECT_UEVENT}),
            "inet": opens(socket.AF_INET, socket.SOCK_STREAM), "unix": opens(socket.AF_UNIX, socket.SOCK_STREAM),
            "route": opens(16, socket.SOCK_RAW, 0)}}
    a, b = socket.socketpair()
    a.sendall(b"works")
    said["pair"] = b.recv(64).decode()
''')
SOCKETS_REPORT = '''def my_softmax(x):
    raise ValueError("SOCKETS " + " ".join(f"{name}:{said[name]}" for name in sorted(said)))
'''
# the sockets a notebook opened (unix, route, a socket pair) and those it was refused, in words of [a-z:A-Z ]
SOCKETS_SAID = ("SOCKETS diag:EPROTONOSUPPORT inet:EAFNOSUPPORT packet:EAFNOSUPPORT pair:works route:opened "
                "uevent:EPROTONOSUPPORT unix:opened vsock:EAFNOSUPPORT")


def with_cells(*sources: str) -> str:
    """The correct sample submission with ``sources`` appended as code cells: the notebook's JSON."""
    notebook = json.loads((SAMPLES / "correct.ipynb").read_text(encoding="utf-8"))
    for index, source in enumerate(sources):
        notebook["cells"].append({"cell_type": "code", "metadata": {}, "source": source, "outputs": [],
                                  "execution_count": None, "id": f"added-{index}"})
    return json.dumps(notebook)


@pytest.fixture(scope="module")
def graded():
    """Grade the CPU hog and the socket opener beside three honest students, as root at --jobs 2."""
    if os.geteuid() != 0:  # the sandboxes share the user's uid and run one at a time (test_hostile.py)
        pytest.skip("graded as a user the sandboxes run one at a time: no neighbour beside the hog at --jobs 2")
    root = Path(tempfile.mkdtemp(prefix="attnbook-hostile-sandbox-"))
    folder, out = root / "submissions", root / "out"
    folder.mkdir()
    for name in HONEST:
        shutil.copy(SAMPLES / "correct.ipynb", folder / f"{name}.ipynb")
    (folder / "cpu_hog.ipynb").write_text(with_cells(SPAWN_SPINNERS, *[SLEEP] * HOG_CELLS, HOG_REPORT),
                                          encoding="utf-8")
    (folder / "sockets.ipynb").write_text(with_cells(OPEN_SOCKETS, SOCKETS_REPORT), encoding="utf-8")
    finished = subprocess.run([sys.executable, "-m", "tools.homework", "grade", HOMEWORK, str(folder), str(out),
                               "--timeout", str(TIMEOUT_S), "--jobs", "2"],
                              capture_output=True, text=True, timeout=RUN_BOUND_S)
    assert finished.returncode == 0, f"the grader failed:\n{finished.stdout[-2000:]}\n{finished.stderr[-2000:]}"
    with (out / "grades.csv").open(encoding="utf-8", newline="") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    # by its student's name: grades.csv names each row's file (its heading shows the name as Markdown code)
    feedback = {name: (out / "feedback" / row["feedback"]).read_text(encoding="utf-8") for name, row in rows.items()}
    yield {"rows": rows, "feedback": feedback, "stderr": finished.stderr}
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("name", HONEST)
def test_honest_students_keep_full_marks_beside_a_hog_of_many_sessions(graded, name):
    found = graded["rows"][name]
    assert (found["total"], found["reason"]) == ("10", "all 8 hidden tests passed"), found
    assert "**Score: 10 / 10**" in graded["feedback"][name]


def test_the_hog_ran_its_children_in_sessions_of_their_own(graded):
    """The attack really ran: every child spun in a session of its own while the neighbours were graded."""
    text = graded["feedback"]["cpu_hog"]
    said = text.split("ValueError: HOG ", 1)[1].split()
    started, sessions = (int(word.split(":")[1].rstrip(".;,)`")) for word in said[:2])
    assert started >= HOG_CHILDREN - 2 and sessions >= started, text


def test_the_grader_says_each_sandbox_gets_a_cpu_share(graded):
    assert "an equal share of the CPU, at most 1 CPU each" in graded["stderr"], graded["stderr"]
    assert "one at a time" not in graded["stderr"], graded["stderr"]


def test_a_notebook_opens_only_local_and_routing_sockets(graded):
    text = graded["feedback"]["sockets"]
    assert f"ValueError: {SOCKETS_SAID}" in text, text


# --- the CPU share of two sandboxes side by side, whatever the machine's other load ---------------------

SPENT = textwrap.dedent('''
    def spent():
        """CPU seconds the spinners have used so far (utime + stime of each, from /proc)."""
        ticks = 0
        for pid in spinners:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])
        return ticks / os.sysconf("SC_CLK_TCK")
''')
SPIN_FOR = textwrap.dedent('''
    import time
    start_wall, start_cpu = time.monotonic(), time.process_time()
    while time.monotonic() - start_wall < SECONDS:
        pass
    rate = (time.process_time() - start_cpu) / (time.monotonic() - start_wall)
''')
WINDOW_S = 4


def caps_with_a_cpu_share() -> cgroups.Plan:
    """This machine's caps, with a CPU share per sandbox: always as root, as a user in a delegated subtree."""
    caps = cgroups.plan()
    if not caps.cpu and os.geteuid() != 0:
        pytest.skip(f"no CPU share per sandbox for a user here: {caps.why_not_cpu}")
    assert caps.cpu, caps.why_not_cpu
    return caps


def test_a_sandbox_of_many_sessions_gets_no_more_cpu_than_one_busy_neighbour():
    """The hog's sixty sessions share one slice: a neighbour's one busy process runs about as fast as all of them.

    Both sandboxes meet the same competition from the rest of the machine, so the ratio of their rates does
    not depend on the machine's load. Without a CPU share each of the hog's sessions counts as much as the
    neighbour, which then gets about 1/58 of the hog's rate.
    """
    caps = caps_with_a_cpu_share()
    hog, neighbour = sandbox.Session(cpu_seconds=120, caps=caps), sandbox.Session(cpu_seconds=120, caps=caps)
    try:
        hog.start()
        source = "spinners = []\n" + SPAWN_SPINNERS.replace("started += 1", "started += 1\n    spinners.append(pid)")
        answer = hog.request({"op": "run", "source": source + SPENT, "timeout": 60}, 65)
        assert answer["ok"] is True, answer
        neighbour.start()
        before = sandbox.sandbox_driver.decode(hog.request({"op": "call", "name": "spent", "args": [], "kwargs": {},
                                                              "timeout": 60}, 65)["value"])
        started = time.monotonic()
        spin = SPIN_FOR.replace("SECONDS", str(WINDOW_S))
        assert neighbour.request({"op": "run", "source": spin, "timeout": 60}, 65)["ok"]
        after = sandbox.sandbox_driver.decode(hog.request({"op": "call", "name": "spent", "args": [], "kwargs": {},
                                                             "timeout": 60}, 65)["value"])
        hog_rate = (after - before) / (time.monotonic() - started)
        neighbour_rate = sandbox.sandbox_driver.decode(neighbour.request({"op": "get", "name": "rate", "timeout": 10},
                                                                         15)["value"])
    finally:
        hog_left, neighbour_left = hog.close(), neighbour.close()
    assert neighbour_rate > hog_rate / 4, (neighbour_rate, hog_rate)
    assert hog_left == neighbour_left == []


# --- the socket allow list in a throwaway process --------------------------------------------------------

UNDER_FILTER = textwrap.dedent('''
    import ctypes, errno, json, sys
    from tools.homework import seccomp
    seccomp.install(sys.stdin.buffer.read())
    libc = ctypes.CDLL(None, use_errno=True)
    pair = (ctypes.c_int * 2)()  # where socketpair writes its two descriptors

    def call(number, *args):
        result = libc.syscall(ctypes.c_long(number), *(ctypes.c_long(a) for a in args))
        return errno.errorcode.get(ctypes.get_errno(), "0") if result < 0 else "ok"

    said = {f"{name} {family} {kind} {protocol}": call(41 if name == "socket" else 53, family, kind, protocol,
                                                        ctypes.addressof(pair))
            for name, family, kind, protocol in json.loads(sys.argv[1])}
    print(json.dumps(said))
''')


def test_the_filter_opens_only_the_socket_families_and_netlink_protocols_it_allows():
    """With distinctive errnos, every refusal is the filter's, and the allowed sockets open."""
    unix, netlink = seccomp.SOCKET_FAMILIES["AF_UNIX"][0], seccomp.AF_NETLINK
    stream, dgram, raw = 1, 2, 3
    calls = {("socket", unix, stream, 0): "ok", ("socketpair", unix, stream, 0): "ok",
             ("socket", netlink, raw, 0): "ok",  # NETLINK_ROUTE: the C library's interfaces
             ("socket", AF_VSOCK, stream, 0): "EL2HLT", ("socket", AF_PACKET, dgram, 0): "EL2HLT",
             ("socket", 2, stream, 0): "EL2HLT", ("socket", 10, dgram, 0): "EL2HLT", ("socket", 0, stream, 0): "EL2HLT",
             ("socket", unix | 1 << 32, stream, 0): "EL2HLT",  # high bits the kernel would drop: refused
             ("socketpair", 30, stream, 0): "EL2HLT",  # AF_TIPC makes socket pairs too
             ("socket", netlink, raw, NETLINK_SOCK_DIAG): "EL3HLT",
             ("socket", netlink, dgram, NETLINK_KOBJECT_UEVENT): "EL3HLT"}
    program = seccomp.program(refusal=errno.ENOTRECOVERABLE, family_refusal=errno.EL2HLT,
                              protocol_refusal=errno.EL3HLT)
    finished = subprocess.run([sys.executable, "-c", UNDER_FILTER, json.dumps(list(calls))], input=program,
                              capture_output=True, timeout=60)
    assert finished.returncode == 0, finished.stderr.decode()[-2000:]
    assert json.loads(finished.stdout) == {" ".join(map(str, call)): said for call, said in calls.items()}


def test_every_allowed_socket_family_says_why_it_is_there():
    assert set(seccomp.SOCKET_FAMILIES) == {"AF_UNIX", "AF_NETLINK"}
    assert all(len(why) > 30 for _, why in seccomp.SOCKET_FAMILIES.values())
    assert seccomp.NETLINK_PROTOCOLS == {"NETLINK_ROUTE": 0}


# --- the CPU share: the group's files, and the fallback without a controller ---------------------------


def delegated_v2(tmp_path, monkeypatch, controllers: str) -> Path:
    """A delegated cgroup v2 folder (a copy of its layout) enabling ``controllers`` for its children."""
    delegated = tmp_path / "delegated"
    delegated.mkdir()
    (delegated / "cgroup.subtree_control").write_text(controllers + "\n")
    monkeypatch.setenv("ATTNBOOK_CGROUP", str(delegated))
    monkeypatch.setattr(cgroups, "_mounts", lambda: [(str(tmp_path), "cgroup2", set())])
    (tmp_path / "cgroup.controllers").write_text("cpu memory pids\n")
    return delegated


def test_a_delegated_v2_subtree_with_the_cpu_controller_gives_each_group_a_weight_and_one_cpu(tmp_path, monkeypatch):
    delegated = delegated_v2(tmp_path, monkeypatch, "cpu memory pids")
    caps = cgroups.plan()
    assert caps.cpu and caps.parents == {"cpu": delegated, "memory": delegated, "pids": delegated}
    group_folder = delegated / "one"
    group_folder.mkdir()
    for name in ("cpu.weight", "cpu.max", "memory.max", "pids.max", "cgroup.procs"):
        (group_folder / name).write_text("")
    group = cgroups.Group(caps, "one")
    assert [(group_folder / name).read_text() for name in ("cpu.weight", "cpu.max")] == ["100", "100000 100000"]
    assert group.join_files() == [str(group_folder / "cgroup.procs")]


def test_a_delegated_v2_subtree_without_the_cpu_controller_says_so(tmp_path, monkeypatch):
    delegated = delegated_v2(tmp_path, monkeypatch, "memory pids")
    caps = cgroups.plan()
    assert not caps.cpu and caps.why_not_cpu == f"{delegated} does not enable the cpu controller"
    assert caps.describe().endswith(f"(cgroup v2), no CPU share: {delegated} does not enable the cpu controller")


def test_each_sandbox_group_on_this_machine_gets_an_equal_weight_and_one_cpu_in_a_folder_of_one_share_per_cpu():
    caps = caps_with_a_cpu_share()
    group = cgroups.Group(caps, f"cpu-test-{os.getpid()}")
    try:
        folder = group.folders["cpu"]
        if caps.kind == "cgroup v1":
            found = [(folder / name).read_text().strip() for name in ("cpu.shares", "cpu.cfs_quota_us",
                                                                     "cpu.cfs_period_us")]
            assert found == ["1024", "100000", "100000"]
            # the folder of every sandbox's group weighs one share per CPU, as many busy sessions would
            assert (folder.parent / "cpu.shares").read_text().strip() == str(1024 * os.cpu_count())
        else:
            assert [(folder / name).read_text().strip() for name in ("cpu.weight", "cpu.max")] == ["100",
                                                                                                 "100000 100000"]
            if not os.environ.get("ATTNBOOK_CGROUP"):  # a delegated folder keeps the weight its owner gave it
                assert (folder.parent / "cpu.weight").read_text().strip() == str(min(10_000, 100 * os.cpu_count()))
        assert str(folder / "cgroup.procs") in group.join_files()
    finally:
        assert group.remove() == []


def test_without_a_cpu_controller_the_sandboxes_are_graded_one_at_a_time(tmp_path, monkeypatch, capsys):
    plan = cgroups.plan

    def without_cpu(memory_bytes=cgroups.MEMORY_BYTES):
        caps = plan(memory_bytes)
        return dataclasses.replace(caps, parents={k: v for k, v in caps.parents.items() if k != "cpu"},
                                   why_not_cpu="the test's choice")

    jobs_seen = []
    grade_in_workers = grading.grade_in_workers

    def spy(plan, paths, timeout, jobs, *args):
        jobs_seen.append(jobs)
        return grade_in_workers(plan, paths, timeout, jobs, *args)

    monkeypatch.setattr(cgroups, "plan", without_cpu)
    monkeypatch.setattr(grading, "grade_in_workers", spy)
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("ann", "bob"):
        shutil.copy(SAMPLES / "correct.ipynb", folder / f"{name}.ipynb")
    results, _ = grading.grade(HOMEWORK, folder, tmp_path / "out", jobs=2)
    assert [result["total"] for result in results] == [10, 10] and jobs_seen == [1]
    said = capsys.readouterr().err
    # as a user the shared uid is said first (test_hostile.py), and the CPU share's absence after it
    assert "no CPU share per sandbox (the test's choice): one at a time instead of --jobs 2" in said, said
    if os.geteuid() == 0:
        assert "homework: no CPU share per sandbox (the test's choice): one at a time" in said, said
    assert said.count("one at a time") == 1, said
