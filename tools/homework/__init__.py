"""The homework: student notebooks, grading in a sandbox and an nbgrader export, from one source each.

Each homework is one MyST notebook source, ``exercises/hw_<chapter>.md``, whose cells carry exactly one
role tag:

- ``instructions`` (markdown), ``setup`` (imports every version runs),
- ``stub`` (the student's starting code) directly followed by its ``solution`` (same names),
- ``public-check`` (calls into ``attnbook.homework``, prints a verdict and keeps it in ``verdict`` or
  ``verdict_<name>``: the nbgrader export asserts them),
- ``hidden-test`` (asserts; metadata ``grade_id`` and ``points``).

Code cells other than setup name their ``task`` in the metadata, which ties a hidden test to the stub it
grades. The modules, one job each:

- :mod:`~tools.homework.sources`: reading and validating a source (the conventions above);
- :mod:`~tools.homework.student`: the student version (instructions, setup, stubs and public checks);
- :mod:`~tools.homework.nbgrader_export`: the nbgrader source notebook;
- :mod:`~tools.homework.grading`: grading a folder of submissions. Each submission's cells run in a
  bubblewrap sandbox (:mod:`~tools.homework.sandbox`, which starts :mod:`~tools.homework.sandbox_driver`
  inside it) and the hidden tests in the grader, which calls the student's functions in the sandbox on
  the tests' inputs and gets their results back as data; a hidden test scores its points when it runs
  without an error. The sandbox's seccomp filter is :mod:`~tools.homework.seccomp`, its memory and
  process caps :mod:`~tools.homework.cgroups`, and :mod:`~tools.homework.traces` gives each submission a
  uid of its own and checks what the uid still owns after it. :mod:`~tools.homework.reports` writes the
  grades and the feedback, passing everything a submission controls through :mod:`~tools.homework.safe_text`;
- :mod:`~tools.homework.cli`: the command line, ``python -m tools.homework`` (``make student``, ``make grade``).
"""
