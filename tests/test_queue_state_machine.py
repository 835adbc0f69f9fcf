"""The queue contract (jobqueue.testing.contract) as a hypothesis state machine, per queue.

Settings: ``max_examples=100`` (50 on DuckDB), ``stateful_step_count=30``, ``deadline=None``,
``derandomize=True`` (the same runs every time, so CI is reproducible; no database
of examples is written). The queue under test uses ``max_attempts=3``, backoff 1 s base and
4 s cap with ``random`` fixed at 1.0, and a 30 s visibility timeout. The same machine runs
against the in-memory :class:`JobQueue` and the DuckDB-backed :class:`DurableQueue`.
"""

from hypothesis import settings as hypothesis_settings

from jobqueue import Backoff, JobQueue, ManualClock, RetryPolicy
from jobqueue.backends.contract import Queue
from jobqueue.backends.duckdb import DurableQueue
from jobqueue.testing.contract import Settings, queue_state_machine

SETTINGS = hypothesis_settings(
    max_examples=100, stateful_step_count=30, deadline=None, derandomize=True, database=None
)


def policy(settings: Settings) -> RetryPolicy:
    """The retry policy the contract asks for."""
    return RetryPolicy(
        max_attempts=settings.max_attempts, backoff=Backoff(base_s=settings.base_s, cap_s=settings.cap_s)
    )


def in_memory_queue(clock: ManualClock, settings: Settings) -> Queue:
    """``jobqueue.JobQueue`` configured as the contract asks."""
    return JobQueue(
        clock=clock,
        visibility_timeout_s=settings.visibility_timeout_s,
        retry=policy(settings),
        random=lambda: 1.0,
    )


def durable_queue(clock: ManualClock, settings: Settings) -> Queue:
    """``jobqueue.backends.duckdb.DurableQueue`` in an in-memory DuckDB database, configured likewise.

    The same SQL runs as on a file; ``tests/test_durable.py`` covers what only a file has
    (restarts, the file lock, a killed worker).
    """
    return DurableQueue(
        ":memory:",
        clock=clock,
        visibility_timeout_s=settings.visibility_timeout_s,
        retry=policy(settings),
        random=lambda: 1.0,
    )


TestInMemoryJobQueue = queue_state_machine(in_memory_queue).TestCase
TestInMemoryJobQueue.settings = SETTINGS

TestDurableQueue = queue_state_machine(durable_queue).TestCase
# Half the examples on DuckDB: the same rules run there (backends/rules.py), and 100 took 80 s
# of make test's 4 minutes; its SQL is covered by these 50 x 30 steps and by test_durable.py.
TestDurableQueue.settings = hypothesis_settings(SETTINGS, max_examples=50)
