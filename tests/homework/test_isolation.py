"""What keeps one submission from leaving state for another: the seccomp filter, the uid per submission, the
check of what a uid still owns after its sandbox, and the memory and process caps per sandbox.

test_hostile.py grades whole hostile submissions with all of this in force; these tests take each part on
its own: the filter loaded in a throwaway process and in a real sandbox, leftovers planted on purpose and
cleaned, a memory hog of many children against its cap, the refusal to start more sandboxes than the
machine's memory holds, and the cgroup v2 files (on a copy of their layout where the machine has v1).
"""

from __future__ import annotations

import csv
import ctypes
import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tools.homework import cgroups, cli, grading, sandbox, seccomp, traces

HOMEWORK = "hw_scaled_dot_product_attention"
SAMPLES = Path(__file__).resolve().parent / "submissions" / HOMEWORK
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="a uid of its own per submission is root's way of grading")

# Loads a BPF program (seccomp.install: prctl, no library), then makes each call and reports its errno.
UNDER_FILTER = textwrap.dedent('''
    import ctypes, errno, json, os, subprocess, sys, threading
    import pyseccomp
    from tools.homework import seccomp
    seccomp.install(sys.stdin.buffer.read())
    libc = ctypes.CDLL(None, use_errno=True)
    arch = pyseccomp.system_arch()

    def call(number, *args):
        result = libc.syscall(ctypes.c_long(number), *(ctypes.c_long(a) for a in args))
        if result == 0 and number == 56:  # a clone that went through: the child leaves at once
            os._exit(0)
        return errno.errorcode.get(ctypes.get_errno(), "0") if result < 0 else "ok"

    said = {name: call(pyseccomp.resolve_syscall(arch, name), 0, 0, 0, 0, 0, 0) for name in json.loads(sys.argv[1])}
    for flag, value in json.loads(sys.argv[2]).items():
        said[flag] = call(56, value | 17, 0, 0, 0, 0)  # clone(flags | SIGCHLD)
    said["clone3"] = call(435, 0, 0)
    said["beyond the table"] = call(int(sys.argv[3]), 0)
    thread = threading.Thread(target=lambda: None)
    thread.start()
    thread.join()
    said["fork"] = "ok" if subprocess.run(["true"]).returncode == 0 else "failed"
    said["getpid"] = call(39)
    print(json.dumps(said))
''')


def test_the_filter_refuses_every_call_it_lists_and_lets_threads_and_processes_run():
    """With a distinctive errno, every refusal is the filter's own, not a missing privilege."""
    program = seccomp.program(refusal=errno.ENOTRECOVERABLE)
    names = seccomp.refused_calls()
    beyond = seccomp.LAST_NUMBER - 1
    finished = subprocess.run([sys.executable, "-c", UNDER_FILTER, json.dumps(names), json.dumps(seccomp.NAMESPACE_FLAGS),
                               str(beyond)], input=program, capture_output=True, timeout=60)
    assert finished.returncode == 0, finished.stderr.decode()[-2000:]
    said = json.loads(finished.stdout)
    assert {name: said[name] for name in names} == {name: "ENOTRECOVERABLE" for name in names}
    assert {flag: said[flag] for flag in seccomp.NAMESPACE_FLAGS} == {flag: "ENOTRECOVERABLE" for flag in seccomp.NAMESPACE_FLAGS}
    assert said["clone3"] == said["beyond the table"] == "ENOSYS"  # glibc then falls back to clone
    assert said["fork"] == said["getpid"] == "ok"


def test_every_class_of_the_filter_says_why_it_is_there():
    assert all(len(why) > 30 and calls for why, calls in seccomp.REFUSED.values())
    assert len(set(seccomp.refused_calls())) == len(seccomp.refused_calls())  # no call listed twice


def run_in_sandbox(source: str, result: str, timeout: float = 30, **session_options):
    """Run ``source`` in a fresh sandbox; the value of ``result`` and what the sandbox left behind."""
    session = sandbox.Session(sandboxed=True, cpu_seconds=120, **session_options)
    session.start()
    try:
        answer = session.request({"op": "run", "source": source, "timeout": timeout}, timeout + sandbox.GRACE_S)
        assert answer["ok"] is True, answer
        value = session.request({"op": "get", "name": result, "timeout": 10}, 15)["value"]
        events = session.new_events()
    finally:
        cleaned = session.close()
    return sandbox.sandbox_driver.decode(value), events, cleaned


def test_in_the_sandbox_keys_and_new_namespaces_are_refused_and_threads_still_run():
    source = textwrap.dedent('''
        import ctypes, errno, subprocess, threading
        libc = ctypes.CDLL(None, use_errno=True)
        def call(number, *args):
            result = libc.syscall(ctypes.c_long(number), *(ctypes.c_long(a) for a in args))
            return errno.errorcode.get(ctypes.get_errno(), "0") if result < 0 else "ok"
        seen = {"add_key": call(248, 0, 0, 0, 0, -4), "keyctl": call(250, 0, -4, 1), "unshare": call(272, 0x10000000),
                "ptrace": call(101, 0, 0, 0, 0), "bpf": call(321, 0, 0, 0)}
        seen["unshare -Ur"] = subprocess.run(["unshare", "-Ur", "true"], capture_output=True).returncode
        seen["seccomp"] = [line.split()[1] for line in open("/proc/self/status") if line.startswith("Seccomp:")][0]
        threads = [threading.Thread(target=lambda: None) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        seen["threads"] = "ok"
    ''')
    seen, _, cleaned = run_in_sandbox(source, "seen")
    assert seen == {"add_key": "EPERM", "keyctl": "EPERM", "unshare": "EPERM", "ptrace": "EPERM", "bpf": "EPERM",
                    "unshare -Ur": 1, "seccomp": "2", "threads": "ok"}
    assert cleaned == []


@ROOT_ONLY
def test_each_submission_gets_a_fresh_uid_held_by_one_grader_at_a_time():
    first, second = traces.lease_uid(), traces.lease_uid()
    try:
        assert first.uid != second.uid and {first.uid, second.uid} < set(traces.uid_range())
        assert traces._locked(traces.LEASES / str(first.uid), blocking=False) is None  # held: nobody else gets it
    finally:
        first.release()
        second.release()
    third = traces.lease_uid()
    third.release()
    assert third.uid not in (first.uid, second.uid)  # released uids come round only after the whole range


@ROOT_ONLY
def test_the_uid_range_can_be_moved_and_a_bad_range_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ATTNBOOK_SANDBOX_UIDS", "3500000")
    lease = traces.lease_uid()
    lease.release()
    assert lease.uid in range(3_500_000, 3_500_000 + traces.UID_COUNT)
    monkeypatch.setenv("ATTNBOOK_SANDBOX_UIDS", "12")
    assert cli.main(["grade", HOMEWORK, str(SAMPLES), str(tmp_path / "out")]) == 1
    assert "ATTNBOOK_SANDBOX_UIDS must be the first uid of a free range of 1000000, got '12'" in capsys.readouterr().err


def printed_as_a_user(unprivileged, tmp_path, code: str) -> list[str]:
    """The words Python ``code`` prints, run as a user that is not root (as :class:`Unprivileged`'s uid when root)."""
    command = [sys.executable, "-c", code]
    if os.geteuid() == 0:
        os.chmod(tmp_path, 0o777)
        command = unprivileged.command(command, tmp_path)
    finished = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert finished.returncode == 0, finished.stderr[-2000:]
    return finished.stdout.split()


def test_graded_as_a_user_the_sandbox_shares_the_graders_uid_in_a_namespace_of_its_own(unprivileged, tmp_path):
    """The same code as a user that is not root: no uid of its own, so only its PID namespace tells it apart."""
    code = ("from tools.homework import sandbox\n"
            "s = sandbox.Session(sandboxed=True, cpu_seconds=60)\ns.start()\n"
            "print(s.uid, len(s.namespaces), s.close())\n")
    assert printed_as_a_user(unprivileged, tmp_path, code) == ["None", "1", "[]"]


def test_graded_as_a_user_the_sandboxs_process_limit_ignores_the_users_other_tasks(unprivileged, tmp_path):
    """The process limit of a user's sandbox counts the tasks of its own user namespace, not the user's.

    The kernel counts every thread of a uid. Set before bwrap as the user's task count plus the cap, the
    limit left a grader holding eight idle threads (a test runner's workers, a Jupyter kernel) no task for
    bwrap's namespaces (EAGAIN), and eight more threads started after the sandbox (another grader of the
    same user) took its cells' forks (BlockingIOError).
    """
    code = ("import threading\nfrom tools.homework import sandbox\n"
            "stop = threading.Event()\nthreads = [threading.Thread(target=stop.wait) for _ in range(16)]\n"
            "[thread.start() for thread in threads[:8]]\n"
            "s = sandbox.Session(sandboxed=True, cpu_seconds=60)\ns.start()\n"
            "[thread.start() for thread in threads[8:]]\n"
            "said = s.request({'op': 'run', 'source': 'import os; pid = os.fork() or os._exit(0); os.waitpid(pid, 0)',"
            " 'timeout': 60}, 65)\nstop.set()\nprint(said['ok'], s.close())\n")
    assert printed_as_a_user(unprivileged, tmp_path, code) == ["True", "[]"]


def plant(uid: int) -> list[subprocess.Popen]:
    """As root: leave, under ``uid``, what a leaking sandbox would: a process, a key, a shared-memory object, a file."""
    as_uid = ["/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]
    sleeper = subprocess.Popen([*as_uid, "/bin/sleep", "300"])
    libc = ctypes.CDLL(None)  # loaded before the fork: the child only makes the call
    assert traces._as_uid(uid, lambda: int(libc.syscall(248, b"user", b"planted", b"secret", 6, -4) > 0)) == 1  # add_key
    subprocess.run([*as_uid, "/usr/bin/ipcmk", "-M", "4096"], check=True, capture_output=True, timeout=30)
    subprocess.run([*as_uid, "/usr/bin/touch", f"/tmp/attnbook-planted-{uid}"], check=True, timeout=30)
    return [sleeper]


@ROOT_ONLY
def test_what_a_uid_still_owns_is_found_and_removed():
    lease = traces.lease_uid()
    try:
        assert not traces.leftovers(lease.uid)  # a fresh uid owns nothing
        sleepers = plant(lease.uid)
        found = traces.leftovers(lease.uid)
        assert (len(found.processes), found.keys, len(found.ipc), found.files) == (
            1, 1, 1, [f"/tmp/attnbook-planted-{lease.uid}"])
        said = traces.clean(found)
        assert said == ["1 process(es) still running", "1 key(s) in the kernel's key rings",
                        "1 System V IPC object(s)", f"1 file(s) in shared folders (/tmp/attnbook-planted-{lease.uid})"]
        assert sleepers[0].wait(timeout=30) == -9
        assert not traces.leftovers(lease.uid)
    finally:
        lease.release()


def test_a_process_left_in_a_sandboxs_namespace_is_found_by_its_namespace():
    """As any user: a process that outlived its sandbox's init (one that ignored the sandbox's end) is found."""
    process = subprocess.Popen(["/bin/sleep", "300"])
    try:
        namespace = traces.namespace_of(process.pid)
        found = traces.leftovers(None, {namespace})
        assert process.pid in found.processes  # (the test's own processes share the namespace too)
    finally:
        process.kill()
        process.wait()
    assert process.pid not in traces.leftovers(None, {namespace}).processes


HOG = textwrap.dedent('''
    import os, select
    import numpy as np
    release_read, release_write = os.pipe()
    report_read, report_write = os.pipe()
    children, refused = [], 0
    for _ in range(12):
        try:
            pid = os.fork()
        except OSError:
            refused += 1
            continue
        if pid == 0:
            os.close(release_write)
            try:
                block = np.ones(BLOCK // 8)  # every page written
            except MemoryError:
                os.write(report_write, b"n")
                os._exit(1)
            os.write(report_write, b"y")
            os.read(release_read, 1)  # hold it until every child has tried
            os._exit(0)  # held its block to the end: it was not stopped by the cap
        children.append(pid)
    answers, waiting = b"", {os.pidfd_open(pid) for pid in children}
    while len(answers) + len(children) - len(waiting) < len(children):  # each child answers, or ends first
        ready, _, _ = select.select([report_read, *waiting], [], [], 60)
        assert ready, "no child answered or ended within 60 s"
        if report_read in ready:
            answers += os.read(report_read, 64)
        waiting -= set(ready)
    os.close(release_write)
    ended = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in children]
    seen = {"held at once": ended.count(0), "memory errors": answers.count(b"n"),
            "killed": ended.count(-9), "refused forks": refused}
''')


def hog_block(caps: cgroups.Plan) -> int:
    """Each child's block: 2/5 of the cap, so that two fit under it and three are a fifth over."""
    return caps.memory_bytes * 2 // 5


def hog(caps: cgroups.Plan) -> str:
    return HOG.replace("BLOCK", str(hog_block(caps)))


@pytest.mark.parametrize("way", ["this machine's caps", "resource limits"])
def test_many_children_together_stay_within_one_sandbox_cap(way):
    """Twelve children that each want 2/5 of the cap: together they never hold more than the cap.

    Each child that got its block holds it until all have answered or ended; those still alive then
    (exit code 0) held their blocks at the same time. Two blocks fit under the cap and three do not, by
    a fifth of the cap either way, so the count does not hang on the few pages the sandbox's own
    interpreter has charged to the group. (With blocks of exactly a third, three fit when that overhead
    was charged before the sandbox joined its group, as on one CI machine.)
    """
    caps = cgroups.plan() if way == "this machine's caps" else cgroups.fallback(cgroups.MEMORY_BYTES, "the test's choice")
    seen, events, cleaned = run_in_sandbox(hog(caps), "seen", timeout=120, caps=caps)
    assert seen["held at once"] * hog_block(caps) <= caps.memory_bytes, seen
    if caps.parents:  # a control group: the kernel stopped some of them, and said so
        assert seen["killed"] >= 1 and events["oom_kill"] == seen["killed"], (seen, events)
    else:  # resource limits: each child's address space is too small for a block, or it could not be made
        assert seen["held at once"] == 0 and seen["memory errors"] + seen["refused forks"] >= 1, seen
    assert cleaned == []


def test_grading_refuses_more_sandboxes_than_the_machine_holds(tmp_path, capsys):
    jobs = cgroups.machine_memory() // cgroups.MEMORY_BYTES + 1
    assert cli.main(["grade", HOMEWORK, str(SAMPLES), str(tmp_path / "out"), "--jobs", str(jobs)]) == 1
    said = capsys.readouterr().err
    assert f"{jobs} sandboxes at once, each capped at 3 GiB" in said and "lower --jobs or --memory" in said
    assert not (tmp_path / "out").exists()


def test_a_submission_that_meets_the_cap_is_told_so(tmp_path):
    """Graded whole: the hog's feedback names the cap (a group stopped a child) or its MemoryError."""
    caps = cgroups.plan()
    notebook = json.loads((SAMPLES / "correct.ipynb").read_text(encoding="utf-8"))
    hog_cell = hog(caps) + "\nassert seen['held at once'] == 99  # fails\n"
    notebook["cells"].append({"cell_type": "code", "metadata": {}, "source": hog_cell, "outputs": [],
                              "execution_count": None, "id": "hog"})
    path = tmp_path / "hog.ipynb"
    path.write_text(json.dumps(notebook), encoding="utf-8")
    result = grading.grade_submission(grading.grading_plan(HOMEWORK), path, timeout=120, caps=caps)
    assert result["total"] == 10 and result["cleanup"] == []
    if caps.parents:
        assert "the submission's processes together reached the sandbox's memory cap (3 GiB)" in result["reason"]
    else:
        assert "raised AssertionError" in result["reason"]  # nothing stopped: the children failed alone


# --- the control-group files, on a copy of their layout ---------------------------------------------------


def fake_v2(folder: Path) -> Path:
    """A folder with the files a delegated cgroup v2 subtree has, enough for plan() and Group."""
    folder.mkdir()
    (folder / "cgroup.subtree_control").write_text("memory pids\n")
    return folder


def test_a_delegated_v2_subtree_is_used_and_each_group_gets_its_caps(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNBOOK_CGROUP", str(fake_v2(tmp_path / "delegated")))
    monkeypatch.setattr(cgroups, "_mounts", lambda: [(str(tmp_path), "cgroup2", set())])
    (tmp_path / "cgroup.controllers").write_text("memory pids\n")
    caps = cgroups.plan(2 * 1024 ** 3)
    assert caps.kind == "cgroup v2" and caps.parents["memory"] == caps.parents["pids"] == tmp_path / "delegated"
    group_folder = tmp_path / "delegated" / "one"
    group_folder.mkdir()
    for name in ("memory.max", "memory.swap.max", "pids.max", "cgroup.procs"):
        (group_folder / name).write_text("")
    (group_folder / "memory.events").write_text("low 0\nhigh 0\nmax 4\noom 2\noom_kill 2\n")
    (group_folder / "pids.events").write_text("max 3\n")
    group = cgroups.Group(caps, "one")
    assert [(group_folder / name).read_text() for name in ("memory.max", "memory.swap.max", "pids.max")] == [
        str(2 * 1024 ** 3), "0", "64"]
    assert group.join_files() == [str(group_folder / "cgroup.procs")] and group.events() == {"oom_kill": 2, "pids_max": 3}


def test_a_v1_group_where_swap_is_not_accounted_is_kept_out_of_swap(tmp_path):
    """No ``memory.memsw.limit_in_bytes``: the cap counts memory alone, so the group's swappiness is 0."""
    parents = {"memory": tmp_path / "memory", "pids": tmp_path / "pids"}
    for controller, names in {"memory": ("memory.swappiness", "memory.limit_in_bytes"), "pids": ("pids.max",)}.items():
        (parents[controller] / "one").mkdir(parents=True)
        for name in names:
            (parents[controller] / "one" / name).write_text("60\n" if name == "memory.swappiness" else "")
    caps = cgroups.Plan("cgroup v1", 2 * 1024 ** 3, 64, 2 * 1024 ** 3, parents)
    cgroups.Group(caps, "one")
    memory = parents["memory"] / "one"
    assert [(memory / name).read_text() for name in ("memory.swappiness", "memory.limit_in_bytes")] == [
        "0", str(2 * 1024 ** 3)]
    assert not (memory / "memory.memsw.limit_in_bytes").exists()


def test_without_a_usable_hierarchy_the_caps_fall_back_to_limits_whose_product_is_the_cap(monkeypatch):
    monkeypatch.setattr(cgroups, "_mounts", lambda: [])
    caps = cgroups.plan()
    assert caps.kind == "resource limits" and caps.why_not_cgroup == "no control groups are mounted"
    assert caps.processes * caps.address_space == caps.memory_bytes
    assert caps.describe() == ("3 GiB per sandbox as 6 processes of at most 512 MiB "
                               "(resource limits: no control groups are mounted)")


def test_what_had_to_be_cleaned_is_marked_in_the_csv_and_the_feedback(tmp_path, monkeypatch):
    """The plumbing from the check to the row: a sandbox made to report a leftover (the real one leaves none)."""
    close = sandbox.Session.close

    def leaking_close(self):
        return [*close(self), "1 process(es) still running"]

    monkeypatch.setattr(sandbox.Session, "close", leaking_close)
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "ann.ipynb").write_bytes((SAMPLES / "correct.ipynb").read_bytes())
    [result], _ = grading.grade(HOMEWORK, folder, tmp_path / "out", jobs=1)
    assert result["total"] == 10 and result["cleanup"] == ["1 process(es) still running"]
    with (tmp_path / "out" / "grades.csv").open(encoding="utf-8", newline="") as handle:
        [row] = list(csv.DictReader(handle))
    assert row["cleanup"] == "1 process(es) still running"
    note = "the sandbox left something on the grading machine, which was removed: 1 process(es) still running"
    assert note in row["reason"]
    assert note in (tmp_path / "out" / "feedback" / row["feedback"]).read_text(encoding="utf-8")
