"""Course helpers: exercise checks, notebook tooling and pictures. No queue logic here.

Check cells of the exercises call :func:`check`; ``python -m jobqueue.teaching.exercises``
builds and checks exercises; ``python -m jobqueue.teaching.notebooks`` runs notebooks and
stores their outputs in a normalised, deterministic form.
"""

from jobqueue.teaching.checks import CheckFailed, check, check_that

__all__ = ["CheckFailed", "check", "check_that"]
