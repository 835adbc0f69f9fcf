"""``python -m jobqueue.teaching.exercises``: the exercises' command line (:mod:`.cli`)."""

from jobqueue.teaching.exercises.cli import main

raise SystemExit(main())
