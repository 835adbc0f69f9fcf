"""The exercises: generated from the solutions, checked one by one, graded for a class.

- :mod:`~jobqueue.teaching.exercises.generate`: a solution notebook's marked answers
  replaced by stubs (``exercises/`` is generated, never edited by hand);
- :mod:`~jobqueue.teaching.exercises.check`: one learner's answers run in the pristine
  exercise and judged against the solution's stored check outputs (``make check``);
- :mod:`~jobqueue.teaching.exercises.isolation`: one check in a process of its own, with a
  time limit, its kernel sandboxed (:mod:`jobqueue.teaching.sandbox`);
- :mod:`~jobqueue.teaching.exercises.grade`: a whole class, a gradebook and feedback
  (``make grade``), and every started exercise (``make check-all``);
- :mod:`~jobqueue.teaching.exercises.cli`: the command line, ``python -m
  jobqueue.teaching.exercises check|check-all|grade|build|verify``.

Each module imports only those above it in this list, so there is no import circle
(``tests/test_layout.py``). This file imports none of them.
"""
