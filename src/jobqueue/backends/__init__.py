"""Where jobs are kept, behind one contract, and the rules every backend follows.

:mod:`jobqueue.backends.contract` declares what a queue offers (:class:`Queue`) and the
optional abilities a backend may add; :mod:`jobqueue.backends.rules` decides what a
failure, a release, a replay or a claim does to a job. The backends (in memory:
:class:`jobqueue.JobQueue`; DuckDB: :class:`jobqueue.DurableQueue`; PostgreSQL:
:class:`jobqueue.PostgresQueue`) call the rules and store what they decide; the two SQL
ones share :class:`jobqueue.backends.sqlqueue.SqlQueue`, which runs the statements of
the same name in each, and :mod:`jobqueue.backends.rows`, which reads their rows by name.
"""
