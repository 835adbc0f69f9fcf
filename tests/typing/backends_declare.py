"""Checked by mypy in tests/test_typing.py, never run: each backend keeps the contract and its abilities.

A backend that drops a member of :class:`Queue`, or changes the signature of an ability
it claims, makes one of these assignments a type error.
"""

from jobqueue import DurableQueue, JobQueue, ManualClock, PostgresQueue
from jobqueue.backends.contract import (
    AcksAndClaims,
    ClaimsAhead,
    KeepsFinished,
    NamesServer,
    Queue,
    WaitsForWork,
)


def in_memory(queue: JobQueue) -> tuple[Queue, KeepsFinished]:
    return queue, queue


def on_duckdb(queue: DurableQueue) -> tuple[Queue, AcksAndClaims, ClaimsAhead, KeepsFinished]:
    return queue, queue, queue, queue


def on_postgres(queue: PostgresQueue) -> tuple[Queue, WaitsForWork, NamesServer, KeepsFinished]:
    return queue, queue, queue, queue


in_memory(JobQueue(clock=ManualClock()))
