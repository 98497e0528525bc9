"""The grading sandbox itself: what code inside it can see and do, the data format, and the start-up check.

These tests run code in a real sandbox (tools/homework/sandbox.py) through the driver's own protocol and read
back what it observed; test_hostile.py grades whole hostile submissions.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest

from tools import ROOT
from tools.homework import cli, grading, reports, sandbox, sandbox_driver, traces
HOMEWORK = "hw_scaled_dot_product_attention"
SAMPLES = Path(__file__).resolve().parent / "submissions" / HOMEWORK
SEES = '''
import glob, os, resource, socket
import attnbook

def can_write(folder):
    try:
        with open(os.path.join(folder, "probe-write"), "w") as handle:
            handle.write("x")
        return True
    except OSError:
        return False

def connects(host, port):
    try:
        socket.create_connection((host, port), timeout=2).close()
        return True
    except OSError:
        return False

status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\\t" in line)
seen = {
    "env": sorted(os.environ),
    "uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(), "caps": status["CapEff"].strip(),
    "no_new_privs": status["NoNewPrivs"].strip(), "seccomp": status["Seccomp"].strip(),
    "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
    "root": sorted(os.listdir("/")),
    "repository": sorted(os.listdir(REPOSITORY)) if os.path.isdir(REPOSITORY) else [],
    "write_package": can_write(os.path.dirname(attnbook.__file__)),
    "write_work": can_write("/sandbox"), "write_tmp": can_write("/tmp"),
    "nproc": list(resource.getrlimit(resource.RLIMIT_NPROC)), "memory": list(resource.getrlimit(resource.RLIMIT_AS)),
    "cpu": list(resource.getrlimit(resource.RLIMIT_CPU)),
    "interfaces": sorted(os.listdir("/sys/class/net")) if os.path.isdir("/sys/class/net") else [],
}
'''


@pytest.fixture()
def session():
    running = sandbox.Session(sandboxed=True, cpu_seconds=60)
    running.start()
    yield running
    assert running.close() == [], "the sandbox left something on the host"


def run(session, source: str, timeout: float = 20) -> dict:
    return session.request({"op": "run", "source": source, "timeout": timeout}, timeout + sandbox.GRACE_S)


def get(session, name: str):
    return sandbox_driver.decode(session.request({"op": "get", "name": name, "timeout": 5}, 10)["value"])


def test_the_start_up_probe_passes_here():
    seen = sandbox.probe()
    assert seen["pid"] <= 2 and not seen["sees_repository"] and not seen["package_writable"]


def test_code_in_the_sandbox_is_alone_unprivileged_and_limited(monkeypatch):
    monkeypatch.setenv("ATTNBOOK_CANARY", "must-not-be-seen")  # set before the sandbox starts: it must not see it
    session = sandbox.Session(sandboxed=True, cpu_seconds=60)
    session.start()
    uid = session.uid
    try:
        source = f"REPOSITORY = {str(ROOT)!r}\n" + SEES
        assert run(session, source) == {"ok": True, "ename": "", "evalue": ""}
        seen = get(session, "seen")
    finally:
        assert session.close() == []
    caps = session.caps
    assert seen["env"] == sorted([*sandbox._environment("/sandbox"), "PWD"])
    if os.geteuid() == 0:
        assert seen["uid"] == seen["gid"] == uid and seen["groups"] == []
        assert uid in traces.uid_range()
        assert seen["nproc"] == [caps.processes, caps.processes]
    else:
        assert seen["uid"] == os.getuid()  # the user namespace's identity mapping
    assert seen["caps"] == "0000000000000000" and seen["seccomp"] == "2"
    assert seen["pids"] == [1, 2]  # bwrap's init and the driver: nothing of the host
    # none of the host's own folders but the paths down to the repository (in /home for a user's clone) and to
    # the Python installation (which the sandbox binds read-only)
    assert {"mnt", "srv", "opt", "home"} & set(seen["root"]) <= {Path(ROOT).parts[1], Path(sys.base_prefix).parts[1]}
    assert set(seen["repository"]) <= {".venv", "code"}  # only what holds the package: no exercises/, no tests/
    assert seen["write_package"] is False and seen["write_work"] is True and seen["write_tmp"] is True
    assert seen["memory"] == [caps.address_space, caps.address_space]
    assert seen["cpu"][0] == 61


def test_the_sandbox_has_no_network(session):
    server = socket.create_server(("127.0.0.1", 0))
    try:
        port = server.getsockname()[1]
        source = f"connected = connects('127.0.0.1', {port}) or connects('1.1.1.1', 53)"
        assert run(session, "REPOSITORY = '/'\n" + SEES + source)["ok"] is True
        assert get(session, "connected") is False
    finally:
        server.close()


def test_a_fork_bomb_stops_at_the_process_limit(session):
    bomb = '''
import os, time
children, refused = 0, None
for _ in range(500):
    try:
        pid = os.fork()
    except OSError as error:
        refused = type(error).__name__
        break
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    children += 1
'''
    assert run(session, bomb)["ok"] is True
    assert get(session, "refused") == "BlockingIOError" and get(session, "children") < session.caps.processes


def test_one_allocation_beyond_the_cap_is_a_memory_error_in_the_cell(session):
    answer = run(session, f"import numpy as np\nhuge = np.ones({session.caps.memory_bytes} // 8)")
    assert answer["ok"] is False and answer["ename"] == "MemoryError"


def test_a_call_returns_data_and_an_exception_comes_back_by_name(session):
    assert run(session, "import numpy as np\ndef double(x):\n    return 2 * x\ndef fail(x):\n"
                        "    raise NotImplementedError('later')\n")["ok"] is True
    call = {"op": "call", "args": [sandbox_driver.encode(np.arange(3.0))], "kwargs": {}, "timeout": 5}
    value = session.request({**call, "name": "double"}, 10)
    assert np.array_equal(sandbox_driver.decode(value["value"]), [0.0, 2.0, 4.0])
    error = sandbox_driver.exception_from(session.request({**call, "name": "fail"}, 10)["raised"])
    assert type(error) is NotImplementedError and str(error) == "later"


def test_the_pretrained_model_loads_in_the_sandbox_from_the_bound_environment(session):
    """hw_pretrained's setup reads all-MiniLM-L6-v2 from the installed wheel: the virtual environment the
    sandbox binds read-only holds it, its hash check passes there, and it runs within one cell's time."""
    from attnbook.pretrained.files import model_folder

    answer = run(session, "from attnbook.pretrained.bert import load_minilm\n"
                          "from attnbook.pretrained.analysis import pair_similarities\n"
                          "from attnbook.pretrained.files import model_folder\n"
                          "folder = str(model_folder())\n"
                          "similarity = float(pair_similarities(['A man plays a guitar.'], ['Someone strums a guitar.'],"
                          " load_minilm())[0])\n", timeout=grading.CELL_TIMEOUT_S)
    assert answer["ok"] is True, f"{answer['ename']}: {answer['evalue']}"
    assert get(session, "folder") == str(model_folder())
    assert 0.3 < get(session, "similarity") < 1.0


# --- the data format ------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [
    None, True, 7, -2 ** 80, 0.1, float("inf"), "text", [1, (2.5, "x")], {"a": [None]},
    np.arange(6, dtype=np.int32).reshape(2, 3), np.array([[True, False]]), np.float32(1.5), np.zeros((0, 4)),
])
def test_values_survive_the_round_trip(value):
    back = sandbox_driver.decode(sandbox_driver.encode(value))
    if isinstance(value, np.ndarray) or isinstance(value, np.generic):
        assert back.dtype == value.dtype and back.shape == value.shape and np.array_equal(back, value)
    else:
        assert back == value and type(back) is type(value)


def test_attnbook_named_tuples_are_rebuilt_and_other_objects_are_not():
    from attnbook import FeedForwardWeights

    weights = FeedForwardWeights(np.eye(2), np.zeros(2), np.eye(2), np.ones(2))
    back = sandbox_driver.decode(sandbox_driver.encode(weights))
    assert type(back) is FeedForwardWeights and np.array_equal(back.b_2, np.ones(2))
    unreadable = sandbox_driver.decode(sandbox_driver.encode(lambda: 0))
    assert isinstance(unreadable, sandbox_driver.Unreadable) and unreadable.type_name == "function"
    assert sandbox_driver.encode(np.array([object()]))["t"] == "unreadable"


@pytest.mark.parametrize(("data", "words"), [
    ({"t": "named", "type": "os.system", "v": []}, "is not an attnbook type"),
    ({"t": "named", "type": "attnbook.homework.CheckResult", "v": []}, "is not a named tuple of attnbook"),
    ({"t": "array", "dtype": "|O8", "shape": [1], "data": ""}, "not booleans or numbers"),
    ({"t": "array", "dtype": "<f8", "shape": [2], "data": "AAAA"}, "with 3 bytes of data"),
    ({"t": "pickle", "v": "gASVAAAAAAAAAAA="}, "unknown tag 'pickle'"),
    ({"t": "int", "v": "1", "extra": 1}, "has the keys"),
    ({"t": "int", "v": "__import__('os')"}, "not a string of digits"),
    ([1, 2], "expected a tagged value"),
])
def test_the_grader_refuses_malformed_answers(data, words):
    with pytest.raises(sandbox_driver.WireError) as error:
        sandbox_driver.decode(data)
    assert words in str(error.value)


def test_an_exception_keeps_a_builtin_class_or_gets_a_harmless_one_of_its_name():
    assert type(sandbox_driver.exception_from({"type": "ValueError", "message": "m"})) is ValueError
    custom = sandbox_driver.exception_from({"type": "SystemExit", "message": "bye"})
    assert type(custom).__name__ == "SystemExit" and isinstance(custom, Exception)
    assert type(sandbox_driver.exception_from({"type": "no such name!", "message": ""})).__name__ == "Exception"


# --- the start-up check and the unsafe mode -------------------------------------------------------------


def test_grading_refuses_to_start_without_bubblewrap(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ATTNBOOK_BWRAP", str(tmp_path / "no-bwrap-here"))
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    out = tmp_path / "out"
    assert cli.main(["grade", HOMEWORK, str(SAMPLES), str(out)]) == 1
    said = capsys.readouterr().err
    assert "cannot isolate the submissions, so nothing was graded" in said
    assert "apt-get install bubblewrap" in said and "--unsafe-no-sandbox" in said
    assert not out.exists()


def test_grading_refuses_when_the_sandbox_does_not_start(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ATTNBOOK_BWRAP", "/bin/false")
    assert cli.main(["grade", HOMEWORK, str(SAMPLES), str(tmp_path / "out")]) == 1
    assert "the sandbox did not start (bwrap exit code 1" in capsys.readouterr().err


def test_the_unsafe_mode_grades_without_the_sandbox_and_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ATTNBOOK_BWRAP", "/bin/false")  # it does not even try the sandbox
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("correct", "blank"):
        (folder / f"{name}.ipynb").write_bytes((SAMPLES / f"{name}.ipynb").read_bytes())
    code = cli.main(["grade", HOMEWORK, str(folder), str(tmp_path / "out"), "--unsafe-no-sandbox"])
    said = capsys.readouterr()
    assert code == 0 and "WARNING: --unsafe-no-sandbox" in said.err
    assert said.out.startswith("blank: 0 / 10") and "correct: 10 / 10  all 8 hidden tests passed" in said.out


def test_a_folder_without_notebooks_is_an_error(tmp_path, capsys):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "readme.txt").write_text("hello", encoding="utf-8")
    assert cli.main(["grade", HOMEWORK, str(tmp_path / "in"), str(tmp_path / "out")]) == 1
    said = capsys.readouterr().err
    assert "submissions: no notebook (*.ipynb) in" in said and "readme.txt: not a notebook (.ipynb)" in said


@pytest.mark.parametrize("text", ["=1+1", "+1", "-1", "@SUM(A1)", " =1+1"])
def test_spreadsheet_triggers_are_quoted(text):
    assert reports.spreadsheet_safe(text) == "'" + text
    assert reports.spreadsheet_safe("alice") == "alice"


@pytest.mark.parametrize(("text", "shown"), [("\tx", "\\tx"), ("\rx", "\\rx"), ("\t=1", "\\t=1")])
def test_tabs_and_carriage_returns_in_a_cell_are_written_out(text, shown):
    assert reports.spreadsheet_safe(text) == shown


def test_notebooks_are_found_at_any_depth_and_in_any_case(tmp_path):
    for relative in ("a.ipynb", "B.IPYNB", "c/d/e/f.ipynb", "c/.ipynb_checkpoints/f-checkpoint.ipynb", "x.py"):
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}", encoding="utf-8")
    found, skipped = grading.submissions_in(tmp_path)
    assert [(item["row"], item["relative"]) for item in found] == [
        ("B", "B.IPYNB"), ("a", "a.ipynb"), ("c", "c/d/e/f.ipynb")]
    assert skipped == [("c/.ipynb_checkpoints/f-checkpoint.ipynb", "a Jupyter checkpoint, not a submission"),
                       ("x.py", "not a notebook (.ipynb)")]


def test_names_are_shown_as_written_and_names_that_only_look_the_same_are_kept_apart(tmp_path):
    for name in ("ann.ipynb", "a\u200bnn.ipynb", "\uff42\uff4f\uff42.ipynb", "carol.ipynb"):  # ｂｏｂ: full-width
        (tmp_path / name).write_text("{}", encoding="utf-8")
    found, _ = grading.submissions_in(tmp_path)
    assert [(item["student"], item["row"], item["look_alike"]) for item in found] == [
        ("ann", "ann.ipynb", True), ("a\\u200bnn", "a\\u200bnn.ipynb", True), ("carol", "carol", False),
        ("\uff42\uff4f\uff42", "\uff42\uff4f\uff42", False)]
    assert found[0]["collision"] == found[1]["collision"] == ["ann.ipynb", "a\\u200bnn.ipynb"]
    assert found[0]["group_name"] == found[1]["group_name"] == "ann"


def test_feedback_file_names_are_distinct_and_safe(tmp_path):
    for relative in ("dup.ipynb", "dup/hw.ipynb", "dup_hw.ipynb", "Ann.ipynb", "ann.ipynb", "..x.ipynb"):
        (tmp_path / relative).parent.mkdir(exist_ok=True)
        (tmp_path / relative).write_text("{}", encoding="utf-8")
    names = [item["feedback_file"] for item in grading.submissions_in(tmp_path)[0]]
    assert len(set(n.lower() for n in names)) == 6
    assert all(re.fullmatch(r"\d{4}-[0-9a-f]{8}(-[A-Za-z0-9_-]+)?\.md", name) for name in names), names


def test_names_and_exceptions_with_control_characters_are_not_printed_raw(tmp_path, capsys):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "evil\x1b[2J.ipynb").write_text("{}", encoding="utf-8")  # an escape code clears the screen
    assert cli.main(["grade", HOMEWORK, str(folder), str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "\x1b" not in printed and printed.startswith("evil\\x1b[2J: 0 / 10  not a valid notebook")


def test_an_exception_class_with_an_odd_name_is_reported_as_an_exception():
    cells = [nbformat.v4.new_code_cell("raise type('Bad\\nName', (Exception,), {})()")]
    runner = grading.Runner(cells, timeout=5, deadline=60, sandboxed=True)
    try:
        runner.run_cells()
    finally:
        assert runner.session.close() == []
    assert runner.notes == ["cell 0 raised an exception"]


def test_a_value_that_cannot_be_sent_in_time_is_unreadable_and_the_rest_is_still_graded():
    plan = grading.grading_plan(HOMEWORK)
    cells = [nbformat.v4.new_code_cell(source) for source in (
        "answer_a12 = [1] * 10 ** 7  # quick to make, longer than the timeout to send",
        "answer_a21 = 0.2\ndef my_softmax(x):\n    return x\n")]
    runner = grading.Runner(cells, timeout=2, deadline=60, sandboxed=True)
    try:
        runner.run_cells()
        space = runner.namespace(plan)
        assert isinstance(space["answer_a12"], sandbox_driver.Unreadable)
        assert space["answer_a12"].type_name.startswith("value that could not be sent (")
        assert space["answer_a21"] == 0.2 and space["my_softmax"](np.ones(2)).tolist() == [1.0, 1.0]
    finally:
        assert runner.session.close() == []


def test_nothing_of_the_hidden_tests_is_sent_into_the_sandbox(monkeypatch):
    """Every request the grader sends, recorded: the submission's cells and inputs, no hidden-test code."""
    sent: list[dict] = []
    request = sandbox.Session.request

    def recording(self, message, timeout):
        sent.append(message)
        return request(self, message, timeout)

    monkeypatch.setattr(sandbox.Session, "request", recording)
    plan = grading.grading_plan(HOMEWORK)
    result = grading.grade_submission(plan, SAMPLES / "correct.ipynb", timeout=5)
    assert result["total"] == 10 and len(sent) > 10
    texts = [json.dumps(message, ensure_ascii=False) for message in sent]
    hidden_lines = {line.strip() for test in plan["hidden"] for line in test["source"].splitlines()
                    if len(line.strip()) > 12 and not line.strip().startswith(("import ", "from "))}
    assert len(hidden_lines) > 10
    assert not [line for line in hidden_lines if any(json.dumps(line)[1:-1] in text for text in texts)]
    assert {message["op"] for message in sent} == {"run", "names", "get", "call"}
