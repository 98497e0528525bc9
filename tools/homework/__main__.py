"""``python -m tools.homework``: the command line of :mod:`tools.homework.cli`."""

from tools.homework.cli import main

raise SystemExit(main())
