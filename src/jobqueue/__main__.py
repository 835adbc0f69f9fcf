"""``python -m jobqueue``: the command line of :mod:`jobqueue.cli`."""

from jobqueue.cli import main

raise SystemExit(main())
