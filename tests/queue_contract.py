"""Reusable checks for any job queue that keeps the promises of lesson 10 (not a test module).

:func:`queue_state_machine` builds a hypothesis ``RuleBasedStateMachine`` that drives a
queue through random runs of enqueue, claim, ack, fail (transient and permanent), release
(a worker gives its job back unrun at shutdown, lesson 11), crash (a worker drops its
lease without acking), advance (the manual clock) and replay, next to a small model of
what each job should be. A release must leave the job waiting, due now, with the
released attempt not counted. After every step it checks the invariants:

- no job is lost: every id ever enqueued is waiting, leased, done (acked) or dead, and
  the queue agrees with the model on which;
- no job is leased to two holders: only the newest lease of a job is honoured; an ack,
  fail or release with any other lease (an older one, or one already released) raises
  ``StaleLeaseError`` and changes nothing;
- attempts never exceed the job's ``max_attempts``;
- a job dies only after its last attempt, a permanent error, or the expiry of its final
  lease.

The machine takes a *factory*, ``factory(clock, settings) -> queue``, so the same checks
run against every implementation: today ``jobqueue.JobQueue``, later a durable one.
Retry delays are predicted with ``random`` fixed at 1.0, so a factory must build its queue
with ``random=lambda: 1.0``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    MultipleResults,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)

from jobqueue import Backoff, DeadLetter, Job, JobType, Lease, ManualClock, StaleLeaseError
from jobqueue.shop import SEND_RECEIPT, ReceiptPayload

IDS = ("receipt-1001", "receipt-1002", "receipt-1003")
STEPS_S = (0.001, 0.5, 1.0, 2.0, 4.0, 29.999, 30.0)

State = Literal["waiting", "leased", "done", "dead"]


class QueueUnderTest(Protocol):
    """The part of a job queue the contract drives."""

    def enqueue(
        self, job_type: JobType[ReceiptPayload], payload: ReceiptPayload, *, id: str | None = None
    ) -> Job: ...

    def claim(self) -> Lease | None: ...

    def ack(self, lease: Lease) -> None: ...

    def fail(self, lease: Lease, error: BaseException | str, *, permanent: bool = False) -> str: ...

    def release(self, lease: Lease) -> Job: ...

    def replay(self, job_id: str) -> Job: ...

    def get(self, job_id: str) -> Job | None: ...

    def dead_letters(self) -> list[DeadLetter]: ...

    def __len__(self) -> int: ...


@dataclass(frozen=True)
class Settings:
    """What the factory must configure: attempts, backoff (s) and visibility timeout (s)."""

    max_attempts: int = 3
    base_s: float = 1.0
    cap_s: float = 4.0
    visibility_timeout_s: float = 30.0

    def retry_delay_s(self, attempt: int) -> float:
        """Delay after failed attempt ``attempt`` with ``random`` fixed at 1.0, in seconds."""
        return Backoff(base_s=self.base_s, cap_s=self.cap_s).delay_s(attempt, lambda: 1.0)


QueueFactory = Callable[[ManualClock, Settings], QueueUnderTest]


@dataclass
class ModelJob:
    """What the model expects of one job id."""

    state: State = "waiting"
    attempts: int = 0
    visible_at: float = 0.0
    token: str | None = None  # the only lease that may ack or fail it
    dead_because: str = ""


@dataclass
class Model:
    """The expected state of every id ever enqueued."""

    jobs: dict[str, ModelJob] = field(default_factory=dict)
    crashed: set[str] = field(default_factory=set)  # tokens whose worker is gone

    def live(self) -> dict[str, ModelJob]:
        return {job_id: job for job_id, job in self.jobs.items() if job.state in ("waiting", "leased")}


def queue_state_machine(
    factory: QueueFactory, settings: Settings = Settings()
) -> type[RuleBasedStateMachine]:
    """A state machine class checking the contract against queues built by ``factory``.

    Run it in a test module with ``TestX = queue_state_machine(factory).TestCase``.
    """

    class QueueMachine(RuleBasedStateMachine):
        leases = Bundle("leases")

        @initialize()
        def enqueue_all(self) -> None:
            for job_id in IDS:
                self.enqueue(job_id)

        def __init__(self) -> None:
            super().__init__()
            self.clock = ManualClock()
            self.queue = factory(self.clock, settings)
            self.model = Model()

        # -- rules -----------------------------------------------------------------

        @rule(job_id=st.sampled_from(IDS))
        def enqueue(self, job_id: str) -> None:
            known = self.model.jobs.get(job_id)
            order_id = int(job_id.removeprefix("receipt-"))
            job = self.queue.enqueue(
                SEND_RECEIPT, ReceiptPayload(order_id=order_id, email="customer@example.com"), id=job_id
            )
            assert job.id == job_id
            if known is not None and known.state != "done":
                assert job.attempts == known.attempts, "a second enqueue with the same id is ignored"
                return
            assert job.attempts == 0
            self.model.jobs[job_id] = ModelJob(visible_at=self.clock.now())

        @rule(target=leases)
        def claim(self) -> MultipleResults[Lease]:
            now = self.clock.now()
            before = {job_id: ModelJob(**vars(job)) for job_id, job in self.model.live().items()}
            lease = self.queue.claim()
            dead_now = {dead.job.id for dead in self.queue.dead_letters()}
            for job_id, job in before.items():
                if job_id in dead_now:  # buried by this claim: its final lease ran out
                    assert job.state == "leased" and job.attempts == settings.max_attempts
                    assert job.visible_at <= now
                    self._die(job_id, "final lease expired")
            if lease is None:
                due = [i for i, j in self.model.live().items() if j.visible_at <= now]
                assert not due, f"claim returned nothing although {due} are due at t={now}"
                return multiple()
            job_id = lease.job.id
            expected = before[job_id]
            assert expected.visible_at <= now, f"{job_id} handed out before t={expected.visible_at}"
            assert lease.job.attempts == expected.attempts + 1 <= settings.max_attempts
            assert lease.expires_at == now + settings.visibility_timeout_s
            self.model.jobs[job_id] = ModelJob("leased", lease.job.attempts, lease.expires_at, lease.token)
            return multiple(lease)

        @rule(lease=leases)
        def ack(self, lease: Lease) -> None:
            if self._refused(lease, lambda held: self.queue.ack(held)):
                return
            self.model.jobs[lease.job.id] = ModelJob("done", lease.job.attempts, token=None)

        @rule(lease=leases)
        def fail_transient(self, lease: Lease) -> None:
            self._fail(lease, permanent=False)

        @rule(lease=leases)
        def fail_permanent(self, lease: Lease) -> None:
            self._fail(lease, permanent=True)

        @rule(lease=leases)
        def release(self, lease: Lease) -> None:
            released: list[Job] = []
            if self._refused(lease, lambda held: released.append(self.queue.release(held))):
                return
            now = self.clock.now()
            attempts = lease.job.attempts - 1
            [job] = released
            assert (job.id, job.attempts, job.run_at, job.leased_until) == (lease.job.id, attempts, now, None)
            assert job.visible_at() == now, "a released job is due at once"
            self.model.jobs[job.id] = ModelJob(attempts=attempts, visible_at=now)  # waiting; token dead

        @rule(lease=leases)
        def crash(self, lease: Lease) -> None:
            self.model.crashed.add(lease.token)

        @rule(seconds=st.sampled_from(STEPS_S))
        def advance(self, seconds: float) -> None:
            self.clock.advance(seconds)

        @precondition(lambda self: any(j.visible_at > self.clock.now() for j in self.model.live().values()))
        @rule(early_s=st.sampled_from((0.0, 0.001)))
        def advance_to_next_due(self, early_s: float) -> None:
            """Jump to the next retry time or lease end, or to just before it."""
            now = self.clock.now()
            due = min(j.visible_at for j in self.model.live().values() if j.visible_at > now)
            self.clock.advance(max(0.0, due - early_s - now))

        @precondition(lambda self: any(job.state == "dead" for job in self.model.jobs.values()))
        @rule(data=st.data())
        def replay(self, data: st.DataObject) -> None:
            dead = sorted(i for i, job in self.model.jobs.items() if job.state == "dead")
            job_id = data.draw(st.sampled_from(dead))
            job = self.queue.replay(job_id)
            assert (job.id, job.attempts) == (job_id, 0)
            self.model.jobs[job_id] = ModelJob(visible_at=self.clock.now())

        # -- invariants ------------------------------------------------------------

        @invariant()
        def no_job_is_lost_and_attempts_never_exceed_max(self) -> None:
            # One read of the queue per step serves both promises: the reads cost a statement
            # each on a database, and nothing changes the queue between two invariants.
            dead = {letter.job.id: letter.job for letter in self.queue.dead_letters()}
            held = {job_id: self.queue.get(job_id) for job_id in self.model.jobs}
            self._no_job_is_lost(dead, held)
            self._attempts_never_exceed_max(dead, held)

        def _no_job_is_lost(self, dead: dict[str, Job], held: dict[str, Job | None]) -> None:
            for job_id, expected in self.model.jobs.items():
                job = held[job_id]
                if expected.state in ("waiting", "leased"):
                    assert job is not None and job_id not in dead, f"{job_id} was lost"
                    assert job.attempts == expected.attempts
                elif expected.state == "dead":
                    assert job is None and job_id in dead, f"{job_id} should be dead"
                else:
                    assert job is None and job_id not in dead, f"{job_id} was acked but is still there"
            assert len(self.queue) == len(self.model.live())
            assert set(dead) == {i for i, job in self.model.jobs.items() if job.state == "dead"}

        def _attempts_never_exceed_max(self, dead: dict[str, Job], held: dict[str, Job | None]) -> None:
            for job in dead.values():
                assert job.attempts <= settings.max_attempts
            for job_id in self.model.live():
                job = held[job_id]
                assert job is not None and job.attempts <= settings.max_attempts

        @invariant()
        def dead_only_for_a_reason(self) -> None:
            for job_id, job in self.model.jobs.items():
                if job.state == "dead":
                    assert job.dead_because, f"{job_id} died for no reason"
                    if job.dead_because != "permanent error":
                        assert job.attempts == settings.max_attempts

        # -- helpers ---------------------------------------------------------------

        def _refused(self, lease: Lease, use: Callable[[Lease], object]) -> bool:
            """Use ``lease`` if its holder is alive; True if the call was (rightly) refused."""
            if lease.token in self.model.crashed:
                return True
            if self.model.jobs[lease.job.id].token == lease.token:
                use(lease)
                return False
            snapshot = (self.queue.get(lease.job.id), len(self.queue), self.queue.dead_letters())
            try:
                use(lease)
            except StaleLeaseError:
                pass
            else:
                raise AssertionError(f"stale {lease.token} on {lease.job.id} was accepted: two holders")
            assert snapshot == (self.queue.get(lease.job.id), len(self.queue), self.queue.dead_letters())
            return True

        def _fail(self, lease: Lease, *, permanent: bool) -> None:
            """Fail ``lease`` and check the outcome: retry after the backoff, or dead."""
            outcome: list[str] = []
            if self._refused(
                lease, lambda held: outcome.append(self.queue.fail(held, "boom", permanent=permanent))
            ):
                return
            job = self.model.jobs[lease.job.id]
            last = job.attempts >= settings.max_attempts
            assert outcome == ["dead" if permanent or last else "retry"]
            if outcome == ["dead"]:
                self._die(lease.job.id, "permanent error" if permanent else "last attempt failed")
            else:
                job.state, job.token = "waiting", None
                job.visible_at = self.clock.now() + settings.retry_delay_s(job.attempts)

        def _die(self, job_id: str, because: str) -> None:
            job = self.model.jobs[job_id]
            job.state, job.token, job.dead_because = "dead", None, because

    return QueueMachine
