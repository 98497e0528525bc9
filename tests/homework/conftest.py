"""Shared setup of the homework tests: the sample submissions kept out of nbval, grading as an ordinary user."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

import pytest

# The sample submissions are data for test_grading.py, not notebooks to check: `make test` runs pytest
# with --nbval over tests/, which would otherwise execute them (one loops forever, two are not notebooks).
collect_ignore_glob = ["submissions/*"]


# --- grading as an ordinary user, from tests that run as root ----------------------------------------


class Unprivileged:
    """Run a command as an ordinary user, from tests that run as root: the grader's other way of working.

    Graded by a user that is not root, the sandbox works differently (a user namespace instead of a uid
    of its own, resource limits instead of control groups), and the tests run the grader both ways. The
    user is a uid no account has (``UID``). The Python the tests use may live where only root can reach it
    (a pyenv under ``/root``), so the command runs in a mount namespace of its own in which every folder on
    the way to the Python installation that others may not enter is covered by an empty, enterable tmpfs
    with only the path onward bound back in. Nothing changes outside that namespace.
    """

    UID = 1_190_000  # below the sandboxes' range (tools.homework.traces.BASE_UID)

    @staticmethod
    def closed_folders(target: Path) -> list[tuple[Path, Path]]:
        """(folder others may not enter, its child on the way to ``target``), from the top down."""
        closed = []
        for folder in reversed(target.parents):
            if folder != Path("/") and not os.stat(folder).st_mode & 0o001:
                closed.append((folder, folder / target.relative_to(folder).parts[0]))
        return closed

    @classmethod
    def command(cls, argv: list[str], home: Path, uid: int = UID) -> list[str]:
        """``argv`` run as ``uid`` with ``HOME=home`` (root only): a command line for ``subprocess``."""
        if os.geteuid() != 0:
            raise PermissionError("only root can run a command as another user")
        steps = []
        for index, (folder, child) in enumerate(cls.closed_folders(Path(os.path.realpath(sys.executable)))):
            keep = f"/tmp/attnbook-keep-{os.getpid()}-{index}"
            folder, child = shlex.quote(str(folder)), shlex.quote(str(child))
            steps += [f"mkdir -p {keep}", f"mount --bind {child} {keep}",
                      f"mount -t tmpfs -o mode=0755,size=1m tmpfs {folder}", f"mkdir -p {child}",
                      f"mount --move {keep} {child}", f"rmdir {keep}"]
        run = ["/usr/bin/setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--",
               "/usr/bin/env", f"HOME={home}", *argv]
        script = " && ".join([*steps, "exec " + " ".join(shlex.quote(part) for part in run)])
        return ["/usr/bin/unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script]


@pytest.fixture(scope="session")
def unprivileged():
    """:class:`Unprivileged`: its ``UID`` and ``command(argv, home)``."""
    return Unprivileged
