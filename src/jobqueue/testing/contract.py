"""The queue contract as code a backend runs as is: every promise of :class:`Queue`, checked.

:func:`queue_state_machine` builds a hypothesis ``RuleBasedStateMachine`` that drives a
queue through random runs of enqueue (one or a batch), claim (one or a batch), ack (one or
a batch), fail (transient and permanent), extend_lease (a heartbeat), release (a worker
gives its job back unrun at shutdown, lesson 11, or defers it for an open circuit breaker
with ``delay_s``, lesson 14), crash (a worker drops its lease without acking), advance
(the manual clock), replay, discard and cancel, next to a small model of what each job
should be.
A release must leave the job waiting, due after its ``delay_s`` (now if 0), with the
released attempt not counted. After every step it checks the invariants:

- no job is lost: every id ever enqueued is waiting, leased, done (acked) or dead, and
  the queue agrees with the model on which;
- no job is leased to two holders: only the newest lease of a job is honoured; an ack,
  fail or release with any other lease (an older one, or one already released) raises
  ``StaleLeaseError`` and changes nothing;
- attempts never exceed the job's ``max_attempts``;
- a job dies only after its last attempt, a permanent error, the expiry of its final
  lease, or (lesson 13) when a claim meets it waiting past its deadline: then it is
  dead-lettered unrun, ``last_error`` starting ``"expired"``, no attempt used;
- a claim hands out the due job of highest priority, the one claimable longest (then the
  one stored first) among equals, and buries exactly the unrunnable jobs in front of it;
  each job keeps the priority and deadline it was enqueued with, and a replay gives a
  fresh deadline;
- a cancel finishes a job not under a lease at once (``"cancelled"``), and marks a leased
  one (``"cancelling"``): a heartbeat then says so, and its ack, its fail (``"cancelled"``,
  no retry) or the claim that finds it due finishes it; it is never handed out again;
- ``jobs()``, ``next_visible_at()``, ``metrics()`` and ``len()`` agree with the model;
  ``clock`` and ``visibility_timeout_s`` are what the factory was asked for.

The jobs carry this module's own payload, :class:`Ping`. Each id has its own job type:
one plain, one urgent (priority 2, a 5 s deadline), one with a 40 s deadline (longer than
a lease); an enqueue may give its job another priority.

The machine takes a *factory*, ``factory(clock, settings) -> queue``, so the same checks
run against every backend (``tests/test_queue_state_machine.py`` and
``tests/test_postgres.py`` run it against the three of this package). Retry delays are
predicted with ``random`` fixed at 1.0, so a factory must build its queue with
``random=lambda: 1.0``. Needs ``hypothesis``.

Introduced in lesson 10; run against every backend since lesson 11; cancel with issue 24.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Literal

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

from jobqueue.backends.contract import Failed, Queue
from jobqueue.backoff import Backoff
from jobqueue.clock import ManualClock
from jobqueue.errors import StaleLeaseError
from jobqueue.job import Job, JobType, Lease


@dataclass(frozen=True)
class Ping:
    """The payload of every job the contract enqueues: a number, nothing else."""

    number: int


IDS = ("ping-1", "ping-2", "ping-3")
STEPS_S = (0.001, 0.5, 1.0, 2.0, 4.0, 29.999, 30.0)
RELEASE_DELAYS_S = (0.0, 0.0, 3.0)  # mostly a shutdown's release, now and then a deferral
PLAIN = JobType("contract_ping", Ping)
URGENT = JobType("contract_urgent_ping", Ping, priority=2, expires_after_s=5.0)
BY_NOON = JobType("contract_ping_by_noon", Ping, expires_after_s=40.0)
TYPES = dict(zip(IDS, (PLAIN, URGENT, BY_NOON), strict=True))
PRIORITIES = (None, None, -1, 0, 3)  # None: the job type's

State = Literal["waiting", "leased", "done", "dead"]


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


QueueFactory = Callable[[ManualClock, Settings], Queue]
"""``factory(clock, settings)``: a fresh, empty queue on ``clock``, configured as ``settings`` say."""


@dataclass
class ModelJob:
    """What the model expects of one job id."""

    state: State = "waiting"
    attempts: int = 0
    visible_at: float = 0.0
    token: str | None = None  # the only lease that may ack or fail it
    dead_because: str = ""
    priority: int = 0
    expires_at: float | None = None
    serial: int = 0  # order among jobs of one priority visible at the same time
    marked: bool = False  # cancelled while leased: whatever finishes it next finishes it as cancelled

    def claim_key(self) -> tuple[int, float, int]:
        """Claims take due jobs in this order: highest priority, claimable longest, stored first."""
        return (-self.priority, self.visible_at, self.serial)


@dataclass
class Model:
    """The expected state of every id ever enqueued."""

    jobs: dict[str, ModelJob] = field(default_factory=dict)
    crashed: set[str] = field(default_factory=set)  # tokens whose worker is gone
    serials: int = 0

    def stored(self, job: ModelJob) -> ModelJob:
        """``job``, with the next serial: the queue stored it anew (enqueue, claim, retry...)."""
        self.serials += 1
        job.serial = self.serials
        return job

    def live(self) -> dict[str, ModelJob]:
        """The jobs expected waiting or leased, by id."""
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
            assert self.queue.clock is self.clock
            assert self.queue.visibility_timeout_s == settings.visibility_timeout_s

        # -- rules -----------------------------------------------------------------

        @rule(job_id=st.sampled_from(IDS), priority=st.sampled_from(PRIORITIES), batch=st.booleans())
        def enqueue(self, job_id: str, priority: int | None = None, batch: bool = False) -> None:
            known = self.model.jobs.get(job_id)
            job_type = TYPES[job_id]
            payload = Ping(number=int(job_id.removeprefix("ping-")))
            if batch:
                [job] = self.queue.enqueue_many(job_type, [payload], ids=[job_id], priority=priority)
            else:
                job = self.queue.enqueue(job_type, payload, id=job_id, priority=priority)
            assert job.id == job_id
            if known is not None and known.state != "done":
                assert job.attempts == known.attempts, "a second enqueue with the same id is ignored"
                assert (job.priority, job.expires_at) == (known.priority, known.expires_at)
                return
            now = self.clock.now()
            after_s = job_type.expires_after_s
            expected = ModelJob(
                visible_at=now,
                priority=job_type.priority if priority is None else priority,
                expires_at=None if after_s is None else now + after_s,
            )
            assert (job.attempts, job.priority, job.expires_at) == (0, expected.priority, expected.expires_at)
            self.model.jobs[job_id] = self.model.stored(expected)

        @rule(target=leases, batch=st.booleans())
        def claim(self, batch: bool) -> MultipleResults[Lease]:
            now = self.clock.now()
            live = self.model.live()
            due = sorted((job.claim_key(), job_id) for job_id, job in live.items() if job.visible_at <= now)
            if batch:
                leases = self.queue.claim_many(1)
                assert len(leases) <= 1
                lease = leases[0] if leases else None
            else:
                lease = self.queue.claim()
            dead_now = {dead.job.id: dead.job for dead in self.queue.dead_letters()}
            for _, job_id in due:  # in claim order: the unrunnable ones in front are buried
                job = self.model.jobs[job_id]
                if job.marked:  # cancelled while leased, and due again: finished, not handed out
                    assert job_id not in dead_now, f"{job_id} was cancelled, but it was buried"
                    self.model.jobs[job_id] = ModelJob("done", job.attempts)
                elif job.attempts >= settings.max_attempts:  # its final lease ran out
                    assert job_id in dead_now, f"{job_id}'s final lease ran out, but it was not buried"
                    self._die(job_id, "final lease expired")
                elif job.expires_at is not None and now > job.expires_at:
                    assert job_id in dead_now, f"{job_id} is past its deadline, but it was not buried"
                    reason = dead_now[job_id].last_error or ""
                    assert reason.startswith("expired"), reason
                    assert dead_now[job_id].attempts == job.attempts, "an expired job uses no attempt"
                    self._die(job_id, "expired")
                else:
                    assert lease is not None, f"claim returned nothing although {job_id} is due at t={now}"
                    assert lease.job.id == job_id, f"claimed {lease.job.id}, not {job_id} (due: {due})"
                    break
            else:
                assert lease is None, f"claimed {lease} although nothing runnable is due at t={now}"
                return multiple()
            expected = self.model.jobs[job_id]
            assert lease.job.attempts == expected.attempts + 1 <= settings.max_attempts
            assert lease.expires_at == now + settings.visibility_timeout_s
            self.model.jobs[job_id] = self.model.stored(
                ModelJob(
                    "leased",
                    lease.job.attempts,
                    lease.expires_at,
                    lease.token,
                    priority=expected.priority,
                    expires_at=expected.expires_at,
                )
            )
            return multiple(lease)

        @rule(lease=leases)
        def ack(self, lease: Lease) -> None:
            if self._refused(lease, lambda held: self.queue.ack(held)):
                return
            self.model.jobs[lease.job.id] = ModelJob("done", lease.job.attempts, token=None)

        @rule(lease=leases)
        def ack_in_a_batch(self, lease: Lease) -> None:
            """``ack_many`` acks a held lease and returns, without raising, one that is not."""
            if lease.token in self.model.crashed:
                return
            if self.model.jobs[lease.job.id].token == lease.token:
                assert self.queue.ack_many([lease]) == []
                self.model.jobs[lease.job.id] = ModelJob("done", lease.job.attempts, token=None)
                return
            snapshot = (self.queue.get(lease.job.id), len(self.queue), self.queue.dead_letters())
            assert self.queue.ack_many([lease]) == [lease], f"stale {lease.token} was acked"
            assert snapshot == (self.queue.get(lease.job.id), len(self.queue), self.queue.dead_letters())

        @rule(lease=leases)
        def extend(self, lease: Lease) -> None:
            """A heartbeat: the lease (token unchanged) now ends a visibility timeout from now."""
            extended: list[Lease] = []
            if self._refused(lease, lambda held: extended.append(self.queue.extend_lease(held))):
                return
            until = self.clock.now() + settings.visibility_timeout_s
            [longer] = extended
            assert (longer.token, longer.job.id, longer.expires_at) == (lease.token, lease.job.id, until)
            job = self.model.jobs[lease.job.id]
            assert longer.cancelled == job.marked, "a heartbeat tells whether the job was cancelled"
            job.visible_at = until  # the job was leased, so due no sooner than its lease ends
            self.model.stored(job)

        @rule(lease=leases)
        def fail_transient(self, lease: Lease) -> None:
            self._fail(lease, permanent=False)

        @rule(lease=leases)
        def fail_permanent(self, lease: Lease) -> None:
            self._fail(lease, permanent=True)

        @rule(lease=leases, delay_s=st.sampled_from(RELEASE_DELAYS_S))
        def release(self, lease: Lease, delay_s: float) -> None:
            released: list[Job] = []
            if self._refused(lease, lambda held: released.append(self.queue.release(held, delay_s=delay_s))):
                return
            due = self.clock.now() + delay_s
            attempts = lease.job.attempts - 1
            [job] = released
            assert (job.id, job.attempts, job.run_at, job.leased_until) == (lease.job.id, attempts, due, None)
            assert job.visible_at() == due, "a released job is due after its delay_s"
            waiting = replace(self.model.jobs[job.id], state="waiting", attempts=attempts, visible_at=due)
            self.model.jobs[job.id] = self.model.stored(replace(waiting, token=None))  # its token is dead

        @precondition(lambda self: bool(self.model.live()))
        @rule(data=st.data())
        def cancel(self, data: st.DataObject) -> None:
            """Cancel a live job: finished at once unless a lease holds it, else marked."""
            job_id = data.draw(st.sampled_from(sorted(self.model.live())))
            job = self.model.jobs[job_id]
            outcome = self.queue.cancel(job_id)
            if job.token is None:
                assert outcome == "cancelled", f"{job_id} was not under a lease, yet {outcome}"
                self.model.jobs[job_id] = ModelJob("done", job.attempts)
            else:
                assert outcome == "cancelling", f"{job_id} was under a lease, yet {outcome}"
                job.marked = True

        @rule(lease=leases)
        def crash(self, lease: Lease) -> None:
            self.model.crashed.add(lease.token)

        @rule(seconds=st.sampled_from(STEPS_S))
        def advance(self, seconds: float) -> None:
            self.clock.advance(seconds)

        @precondition(lambda self: self._next_moment() is not None)
        @rule(early_s=st.sampled_from((0.0, 0.001)))
        def advance_to_next_due(self, early_s: float) -> None:
            """Jump to the next retry time, lease end or deadline, or to just before it."""
            now = self.clock.now()
            moment = self._next_moment()
            assert moment is not None
            self.clock.advance(max(0.0, moment - early_s - now))

        @precondition(lambda self: any(job.state == "dead" for job in self.model.jobs.values()))
        @rule(data=st.data())
        def replay(self, data: st.DataObject) -> None:
            dead = sorted(i for i, job in self.model.jobs.items() if job.state == "dead")
            job_id = data.draw(st.sampled_from(dead))
            job = self.queue.replay(job_id)
            now = self.clock.now()
            after_s = TYPES[job_id].expires_after_s
            was = self.model.jobs[job_id]
            expires_at = None if after_s is None else now + after_s  # a fresh deadline from now
            assert (job.id, job.attempts) == (job_id, 0)
            assert (job.priority, job.expires_at) == (was.priority, expires_at)
            self.model.jobs[job_id] = self.model.stored(
                ModelJob(visible_at=now, priority=was.priority, expires_at=expires_at)
            )

        @precondition(lambda self: any(job.state == "dead" for job in self.model.jobs.values()))
        @rule(data=st.data())
        def discard(self, data: st.DataObject) -> None:
            dead = sorted(i for i, job in self.model.jobs.items() if job.state == "dead")
            job_id = data.draw(st.sampled_from(dead))
            letter = self.queue.discard(job_id)
            assert (letter.job.id, letter.job.attempts) == (job_id, self.model.jobs[job_id].attempts)
            self.model.jobs[job_id] = ModelJob("done", letter.job.attempts)  # gone, its id free again

        # -- invariants ------------------------------------------------------------

        @invariant()
        def the_views_agree(self) -> None:
            """``jobs()``, ``next_visible_at()`` and ``metrics()`` say what the model says."""
            live = self.model.live()
            listed = self.queue.jobs()
            assert sorted(job.id for job in listed) == sorted(live)
            assert [job.visible_at() for job in listed] == sorted(job.visible_at() for job in listed)
            assert self.queue.next_visible_at() == min(
                (job.visible_at for job in live.values()), default=None
            )
            numbers = self.queue.metrics()
            assert numbers.waiting + numbers.scheduled + numbers.leased == len(live)
            assert numbers.dead_letters == sum(job.state == "dead" for job in self.model.jobs.values())

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
                    assert (job.priority, job.expires_at) == (expected.priority, expected.expires_at)
                elif expected.state == "dead":
                    assert job is None and job_id in dead, f"{job_id} should be dead"
                    assert dead[job_id].attempts == expected.attempts
                    assert (dead[job_id].priority, dead[job_id].expires_at) == (
                        expected.priority,
                        expected.expires_at,
                    )
                else:
                    assert job is None and job_id not in dead, f"{job_id} was acked but is still there"
            assert len(self.queue) == len(self.model.live())
            assert set(dead) == {i for i, job in self.model.jobs.items() if job.state == "dead"}

        def _attempts_never_exceed_max(self, dead: dict[str, Job], held: dict[str, Job | None]) -> None:
            for letter in dead.values():
                assert letter.attempts <= settings.max_attempts
            for job_id in self.model.live():
                job = held[job_id]
                assert job is not None and job.attempts <= settings.max_attempts

        @invariant()
        def dead_only_for_a_reason(self) -> None:
            for job_id, job in self.model.jobs.items():
                if job.state == "dead":
                    assert job.dead_because, f"{job_id} died for no reason"
                    if job.dead_because not in ("permanent error", "expired"):
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
            failed: list[Failed] = []
            if self._refused(
                lease, lambda held: failed.append(self.queue.fail(held, "boom", permanent=permanent))
            ):
                return
            job = self.model.jobs[lease.job.id]
            if job.marked:
                assert [(f.outcome, f.run_at) for f in failed] == [("cancelled", None)]
                self.model.jobs[lease.job.id] = ModelJob("done", job.attempts)
                return
            last = job.attempts >= settings.max_attempts
            assert [f.outcome for f in failed] == ["dead" if permanent or last else "retry"]
            if failed[0].outcome == "dead":
                assert failed[0].run_at is None
                self._die(lease.job.id, "permanent error" if permanent else "last attempt failed")
            else:
                job.state, job.token = "waiting", None
                job.visible_at = self.clock.now() + settings.retry_delay_s(job.attempts)
                assert failed[0].run_at == job.visible_at  # the retry's time, as the queue stored it
                self.model.stored(job)

        def _next_moment(self) -> float | None:
            """The next time (s) a live job comes due or passes its deadline, if any is ahead."""
            now = self.clock.now()
            moments = [
                moment
                for job in self.model.live().values()
                for moment in (job.visible_at, job.expires_at)
                if moment is not None and moment > now
            ]
            return min(moments, default=None)

        def _die(self, job_id: str, because: str) -> None:
            job = self.model.jobs[job_id]
            job.state, job.token, job.dead_because = "dead", None, because

    return QueueMachine
