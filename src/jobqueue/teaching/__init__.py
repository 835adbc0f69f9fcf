"""Course helpers: exercise checks, notebook tooling and pictures. No queue logic here.

Check cells of the exercises call :func:`check` and :func:`check_that`, and the last one
calls :func:`summary`; ``python -m jobqueue.teaching.exercises`` builds and checks
exercises; ``python -m jobqueue.teaching.notebooks`` runs notebooks and stores their
outputs in a normalised, deterministic form.
"""

from jobqueue.teaching.checks import check, check_that, summary

__all__ = ["check", "check_that", "summary"]
