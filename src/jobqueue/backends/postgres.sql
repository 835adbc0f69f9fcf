-- The SQL of jobqueue.backends.postgres.PostgresQueue, one named block per statement.
-- Times are seconds since the epoch from the queue's clock, passed in as %(now)s. By default
-- that clock reads the server's time (jobqueue.clock.ServerClock, synced with `server_time`),
-- so every process agrees; a ManualClock passed in drives the demos and tests.
-- {job_columns} and {dead_columns} stand for the select lists every backend reads rows with
-- (filled in when this file is loaded, from jobqueue's one row-to-Job conversion), and
-- {expiry_reason} and {lease_lost_reason} for the last_error of a job a claim dead-letters
-- (jobqueue.backends.rules.refusal decides the same in Python), {live_priorities} for the
-- priorities of the live jobs, highest first, one index probe each (PRIORITIES_IN_USE), {new_columns} and
-- {new_values} for the columns an enqueue fills, after the id, type and payload.
-- Arrays of text go as %(name)b, in binary: psycopg sends each string as it is, where the
-- text form would quote and escape every element in Python (slower than the statement).
-- The acks, `enqueue_fresh` and `count_outcomes` read their arrays with unnest in a select
-- list, several side by side (PostgreSQL runs them in step, element k of each in row k; the
-- arrays sent are always of one length), not in FROM: a function in FROM is first run to
-- its end into a store, whose rows are then read back, where the select list hands them on
-- as they come (measured, taking turns batch by batch on one table: about 0.5 us less
-- server time per job on an ack of 100, and as much on an `enqueue_fresh` of 100, whose
-- MATERIALIZED CTE still stores them once). `enqueue` keeps unnest in FROM: the planner
-- expects 1,000 rows of generate_subscripts (it cannot size a parameter's array), and so
-- many could make it look up the held windows in `enqueue` by hashing every held row
-- instead of one probe per id.
-- One table holds live and dead jobs (died_at is NULL while a job lives), so the primary
-- key alone keeps an id unique across waiting, leased and dead jobs, even between processes.

-- The migrations: block migration_N takes the tables from version N - 1 to N and records
-- N. An empty database runs every one, in order, in one transaction under an advisory
-- lock (two processes may start at once). Live tables are migrated only by
-- jobqueue.backends.postgres.migrate, which builds and drops indexes CONCURRENTLY, each
-- statement alone: write each step so that it can run again after being cut short
-- (IF NOT EXISTS), its version recorded last. No parameters.

-- name: migration_2
-- Lesson 12's tables.
CREATE TABLE jobqueue_schema (version integer NOT NULL);
CREATE SEQUENCE jobqueue_serial;  -- claim order among jobs visible at the same time
CREATE SEQUENCE jobqueue_lease;   -- lease tokens: unique across every process and queue object
CREATE SEQUENCE jobqueue_job_id;  -- ids job-N of jobs enqueued without one
CREATE TABLE jobqueue_jobs (
    id text PRIMARY KEY,
    type text NOT NULL,
    payload text NOT NULL,
    attempts integer NOT NULL DEFAULT 0,
    max_attempts integer NOT NULL,
    base_s double precision NOT NULL,
    cap_s double precision NOT NULL,
    run_at double precision NOT NULL,
    leased_until double precision,
    leased_at double precision,  -- when the current lease was claimed (extend keeps it)
    lease_token text,
    last_error text,
    visible_at double precision NOT NULL,  -- run_at, or the lease's end while leased
    serial bigint NOT NULL DEFAULT nextval('jobqueue_serial'),
    died_at double precision  -- set when the job is dead-lettered
);
-- The claim reads this index in order and stops after LIMIT rows: O(log n) in the backlog.
CREATE INDEX jobqueue_jobs_claim ON jobqueue_jobs (visible_at, serial) WHERE died_at IS NULL;
CREATE INDEX jobqueue_jobs_dead ON jobqueue_jobs (died_at, id) WHERE died_at IS NOT NULL;
CREATE TABLE jobqueue_outcomes (
    second bigint PRIMARY KEY,
    done bigint NOT NULL,
    failed bigint NOT NULL
);
INSERT INTO jobqueue_schema VALUES (2);

-- name: migration_3
-- Priorities and deadlines (lesson 13): old jobs get priority 0 and no deadline. The claim
-- index takes the priority first: within each priority the due jobs come first (visible_at
-- ascending); PostgreSQL 18 skips over the rest of a priority to the next (a skip scan),
-- so few priorities cost little.
ALTER TABLE jobqueue_jobs
    ADD COLUMN IF NOT EXISTS priority integer NOT NULL DEFAULT 0,
    ADD COLUMN IF NOT EXISTS expires_at double precision,
    ADD COLUMN IF NOT EXISTS expires_after_s double precision;
DROP INDEX jobqueue_jobs_claim;
CREATE INDEX jobqueue_jobs_claim ON jobqueue_jobs (priority DESC, visible_at, serial) WHERE died_at IS NULL;
UPDATE jobqueue_schema SET version = 3;

-- name: migration_4
-- Fencing tokens (lesson 06): each claim stores the next number of jobqueue_fencing in the
-- job's row, and the row keeps it through a release, a retry, its death and a replay. Jobs
-- claimed before have token 0, below every number to come. (`fencing_floor` keeps the
-- numbers growing across a crash.)
CREATE SEQUENCE IF NOT EXISTS jobqueue_fencing;
ALTER TABLE jobqueue_jobs ADD COLUMN IF NOT EXISTS fencing_token bigint NOT NULL DEFAULT 0;
UPDATE jobqueue_schema SET version = 4;

-- name: migration_5
-- Age since enqueue (lesson 13): each job stores when it was enqueued, kept through its
-- retries and releases. Jobs enqueued before have NULL, and the metrics count them from
-- their run_at instead. Adding a column without a default rewrites no row. Retention:
-- acked jobs kept for retain_s seconds (a job row, its outcome and when it finished), in
-- a table of their own, so the claim index never holds them; pruned by finished_at.
ALTER TABLE jobqueue_jobs ADD COLUMN IF NOT EXISTS enqueued_at double precision;
CREATE TABLE IF NOT EXISTS jobqueue_finished (
    id text NOT NULL,
    type text NOT NULL,
    payload text NOT NULL,
    attempts integer NOT NULL,
    max_attempts integer NOT NULL,
    base_s double precision NOT NULL,
    cap_s double precision NOT NULL,
    run_at double precision NOT NULL,
    leased_until double precision,
    leased_at double precision,
    last_error text,
    priority integer NOT NULL,
    expires_at double precision,
    expires_after_s double precision,
    fencing_token bigint NOT NULL,
    enqueued_at double precision,
    outcome text NOT NULL,  -- 'done' (acked) or 'cancelled'
    finished_at double precision NOT NULL
);
CREATE INDEX jobqueue_finished_at ON jobqueue_finished (finished_at);
UPDATE jobqueue_schema SET version = 5;

-- name: migration_6
-- Snoozes (jobqueue.errors.Snooze): how many times each job was given back by a snooze,
-- which jobqueue.backends.rules.MAX_SNOOZES bounds. Old jobs start at 0.
ALTER TABLE jobqueue_jobs ADD COLUMN IF NOT EXISTS snoozes integer NOT NULL DEFAULT 0;
UPDATE jobqueue_schema SET version = 6;

-- name: migration_7
-- Cancelling (queue.cancel): a leased job marked cancelled, which its ack or fail, or the
-- claim that finds its lease ran out, finishes as 'cancelled' in jobqueue_finished. A
-- constant default rewrites no row. The dashboard counts the cancelled jobs kept through
-- their own partial index, whatever else the table keeps.
ALTER TABLE jobqueue_jobs ADD COLUMN IF NOT EXISTS cancelled boolean NOT NULL DEFAULT false;
CREATE INDEX jobqueue_finished_cancelled ON jobqueue_finished (type) WHERE outcome = 'cancelled';
UPDATE jobqueue_schema SET version = 7;
-- name: migration_8
-- Unique windows (enqueue's unique_for_s): each job stores its window (NULL: none; a new
-- column without a default rewrites no row), and jobqueue_held the ids of jobs enqueued
-- with one, with their type and payload (what a repeat's enqueue returns once the job is
-- gone). held_until is 'Infinity' while the job lives or is dead, then its finish +
-- unique_for_s (jobqueue.backends.rules.held_until); pruned with the finished jobs once
-- past. Rows only for jobs with a window: a job without one costs nothing here.
ALTER TABLE jobqueue_jobs ADD COLUMN IF NOT EXISTS unique_for_s double precision;
ALTER TABLE jobqueue_finished ADD COLUMN IF NOT EXISTS unique_for_s double precision;
CREATE TABLE IF NOT EXISTS jobqueue_held (
    id text PRIMARY KEY,
    type text NOT NULL,
    payload text NOT NULL,
    unique_for_s double precision NOT NULL,
    held_until double precision NOT NULL
);
CREATE INDEX jobqueue_held_until ON jobqueue_held (held_until);
UPDATE jobqueue_schema SET version = 8;

-- name: migration_9
-- Named queues (issue 24): each job, and each kept finished job, names the queue it waits
-- in; jobs enqueued before are in 'default' (a column with a constant default rewrites no
-- row). A claim from one named queue reads jobqueue_jobs_queue_claim: the claim index with
-- the queue first, so it walks that queue's priorities and due jobs and never another
-- queue's. The index leaves out the queue 'default': a job there is in the claim index
-- only, so a queue that names no queue writes no entry more per enqueue and per claim (with
-- every job in it, the second index cost +30 % WAL per enqueue, +19 % per claim and ack).
-- The price: a claim from 'default' alone reads the claim index and passes over the due
-- jobs of the named queues, as a type filter does. Name every queue whose backlog must not
-- slow another's claims.
ALTER TABLE jobqueue_jobs ADD COLUMN IF NOT EXISTS queue text NOT NULL DEFAULT 'default';
ALTER TABLE jobqueue_finished ADD COLUMN IF NOT EXISTS queue text NOT NULL DEFAULT 'default';
CREATE INDEX jobqueue_jobs_queue_claim ON jobqueue_jobs (queue, priority DESC, visible_at, serial)
    WHERE died_at IS NULL AND queue <> 'default';
UPDATE jobqueue_schema SET version = 9;

-- name: migration_10
-- Done and failed per job type and named queue (issue 24): each second's outcomes are
-- counted per (type, queue) in a table of their own, the key every process adds to. It is
-- added beside jobqueue_outcomes, not made from it, so that a worker of version 9 still
-- running during a rolling deploy goes on writing its counts there (ON CONFLICT (second)):
-- they count in the totals and in no type's or queue's row, as do the rows from before.
CREATE TABLE IF NOT EXISTS jobqueue_outcomes_by_key (
    second bigint NOT NULL,
    type text NOT NULL,
    queue text NOT NULL,
    done bigint NOT NULL,
    failed bigint NOT NULL,
    PRIMARY KEY (second, type, queue)
);
UPDATE jobqueue_schema SET version = 10;

-- name: migration_11
-- Ids compared byte by byte (COLLATE "C"), as the in-memory and DuckDB queues order them,
-- whatever the database's own collation. An id is a key, never text to sort for people, and
-- every enqueue, claim and ack walks the primary key's index, comparing ids: under a libc
-- collation other than C or POSIX (C.UTF-8, en_US.UTF-8...) each comparison goes through
-- the C library's strcoll (measured on a libc C.UTF-8 database: a drain of 10,000 jobs at
-- batch 100 took 2-4 % less time, benchmarks/README.md). The ids of jobqueue_held and
-- jobqueue_finished change too, so that every id compares the same way and a join of
-- jobqueue_held's ids to jobqueue_jobs' can use the index of either.
-- On live tables (migrate) each table's new index is built concurrently, then swapped in by
-- a transaction of that table alone. Changing only a column's collation rewrites no row, and
-- the primary key's new index, sorted byte by byte already, is kept as it is: the swap of
-- jobqueue_jobs held its lock 0.03 s with 2,000,000 jobs, its commit included. A partial
-- index is never kept that way (PostgreSQL rebuilds it, reading the whole table under that
-- lock), so jobqueue_jobs_dead is dropped before the swap and built again concurrently after
-- it; meanwhile the reads of dead letters scan the table. Each transaction here locks one
-- table (an index statement between two ends the first), so one that waits for its lock,
-- up to migrate's lock_timeout_s, holds no other table's and cannot deadlock with the queue's
-- own transactions. jobqueue_jobs goes last: a lock that does not come is most likely met
-- there, and the run that follows builds only jobqueue_held's new index again. A run cut
-- short can run again; cut short after jobqueue_jobs' swap, it builds that table's two new
-- indexes once more.
ALTER TABLE jobqueue_finished ALTER COLUMN id TYPE text COLLATE "C";
CREATE UNIQUE INDEX jobqueue_held_id_bytes ON jobqueue_held (id COLLATE "C");
ALTER TABLE jobqueue_held DROP CONSTRAINT jobqueue_held_pkey;
ALTER TABLE jobqueue_held ALTER COLUMN id TYPE text COLLATE "C";
ALTER TABLE jobqueue_held ADD CONSTRAINT jobqueue_held_pkey PRIMARY KEY USING INDEX jobqueue_held_id_bytes;
CREATE UNIQUE INDEX jobqueue_jobs_id_bytes ON jobqueue_jobs (id COLLATE "C");
DROP INDEX jobqueue_jobs_dead;
ALTER TABLE jobqueue_jobs DROP CONSTRAINT jobqueue_jobs_pkey;
ALTER TABLE jobqueue_jobs ALTER COLUMN id TYPE text COLLATE "C";
ALTER TABLE jobqueue_jobs ADD CONSTRAINT jobqueue_jobs_pkey PRIMARY KEY USING INDEX jobqueue_jobs_id_bytes;
CREATE INDEX jobqueue_jobs_dead ON jobqueue_jobs (died_at, id) WHERE died_at IS NOT NULL;
UPDATE jobqueue_schema SET version = 11;

-- name: fencing_floor
-- Run on each new connection before its first claim, in a transaction of its own: moves
-- jobqueue_fencing 2^24 (16,777,216) numbers on, and waits for the disk. A claim commits
-- without waiting for the disk (see `claim`), so a server crash can lose the WAL of the last
-- claims, the numbers they drew from the sequence with it, and the sequence would hand those
-- numbers out again: to a new holder, while the old one still holds the same token. Every
-- process loses its connection in a crash, so each takes this step before it claims again:
-- past every number drawn before the crash (the claims a crash can lose are those of its
-- last moments, three wal_writer_delay by default: 0.6 s, thousands of numbers, not
-- millions). The step is no bigger, as each new connection spends it: at 100 new
-- connections a second, the 2^63 numbers of the sequence last 170 years (2^32 a step would
-- have lasted 8 months). pg_current_xact_id() gives the transaction an id, so its commit
-- writes a record and waits for it, and for the sequence's record before it, to reach the
-- disk. Behind a transaction pooler the client's connection to the pooler outlives a crash
-- of the server, so this step is not taken again (see PostgresQueue.transaction_pooler).
WITH disk_wait AS MATERIALIZED (
    SELECT set_config('synchronous_commit', 'on', true)
)
SELECT pg_current_xact_id(), setval('jobqueue_fencing', nextval('jobqueue_fencing') + 16777216)
FROM disk_wait;

-- name: generic_plans
-- Run once on the queue's own connection, where the hot statements are prepared: plan each
-- of them once, for any parameters. By default PostgreSQL plans a prepared statement
-- afresh for its first five runs and then keeps doing so whenever the plan for the given
-- values looks cheaper than the generic one, which it does for the enqueue and the claim:
-- planning then costs more than running (measured: a one-job enqueue 0.6 ms, 0.4 ms with
-- one plan). A plan kept is kept until the table's statistics change: one made while the
-- queue was nearly empty, when reading every row costs less than looking a few up, would
-- read every row of the backlog that came after, on each claim. No statement of the queue
-- needs that read (each finds its rows by key, by ctid or through the claim index, and the
-- metrics read every row whatever this says), so it is never planned. Nor, unless nothing
-- else can run a statement, is a bitmap scan, which returns rows in the table's order: a
-- claim planned on a table never analysed (a worker started on a backlog enqueued moments
-- before), its types' filter guessed to keep one row, read every due job through a bitmap
-- and sorted them, on each claim until the table was first analysed (autovacuum: within
-- about a minute), a claim of 20 reading the whole backlog. Read in the claim index's
-- order, a claim stops at its limit. (tests/test_postgres.py checks the plans kept on a
-- queue that grew, and on one opened on a backlog.)
SET plan_cache_mode = force_generic_plan;
SET enable_seqscan = off;
SET enable_bitmapscan = off;

-- name: lock_schema
SELECT pg_advisory_xact_lock(hashtext('jobqueue_schema'));

-- name: lock_migrations
-- jobqueue.backends.postgres.migrate's lock, for its whole session: two migrations take turns.
SELECT pg_try_advisory_lock(hashtext('jobqueue_migrate'));

-- name: set_lock_timeout
-- How long a migration's statements wait for a table lock before they give up, in ms.
SELECT set_config('lock_timeout', %(ms)s, false);

-- name: invalid_index
-- An index of that name left invalid by a concurrent build that was cut short.
SELECT FROM pg_index WHERE indexrelid = to_regclass(%(name)s) AND NOT indisvalid;

-- name: schema_version
SELECT version FROM jobqueue_schema;

-- name: queue_relations
-- The tables and sequences named like the queue's, whoever made them.
SELECT relname FROM pg_class
WHERE relnamespace = current_schema()::regnamespace AND relkind IN ('r', 'p', 'S', 'v', 'm')
  AND relname LIKE 'jobqueue\_%' ORDER BY relname;

-- name: set_statement_timeout
-- How long any statement on the queue's own connection may run, lock waits included, in ms.
SELECT set_config('statement_timeout', %(ms)s, false);

-- name: server_time
-- The server's clock, in seconds since the epoch (ServerClock measures its offset with it).
SELECT extract(epoch FROM clock_timestamp())::float8;

-- name: has_schema
-- A plain query of the catalog, under this statement's snapshot: it sees a table another
-- process committed a moment ago (a cached lookup such as to_regclass may not yet).
SELECT EXISTS (SELECT FROM pg_tables WHERE schemaname = current_schema() AND tablename = 'jobqueue_schema');

-- name: enqueue
-- Every payload in one statement. Rows without an id take job-N from the sequence. ON
-- CONFLICT DO NOTHING skips an id already held (waiting, leased or dead, committed by
-- anyone); `old` is what this statement's snapshot shows of a skipped id.
-- With a unique window (%(unique_for_s)s not NULL) `gate` first takes each id in
-- jobqueue_held, and only the ids it took are inserted. Its ON CONFLICT waits for a racing
-- enqueue or ack that holds the same row, then reads their committed row (a window not
-- over, or a job alive: 'Infinity', refuses the id), so producers racing each other and
-- the ack leave one job. Without a window an id under a window is refused too, as this
-- statement's snapshot shows it. An id `gate` took whose insert conflicted (a job enqueued
-- without a window holds it) is given back by `unhold_live`.
WITH wanted AS MATERIALIZED (
    SELECT n, coalesce(id, 'job-' || nextval('jobqueue_job_id')) AS id, payload
    FROM unnest(%(ids)b::text[], %(payloads)b::text[]) WITH ORDINALITY AS w (id, payload, n)
), gate AS (
    INSERT INTO jobqueue_held AS held (id, type, payload, unique_for_s, held_until)
    SELECT id, %(type)s, payload, %(unique_for_s)s::float8, 'Infinity' FROM wanted
    WHERE %(unique_for_s)s::float8 IS NOT NULL ORDER BY n
    ON CONFLICT (id) DO UPDATE
    SET type = excluded.type, payload = excluded.payload, unique_for_s = excluded.unique_for_s,
        held_until = excluded.held_until
    WHERE held.held_until <= %(now)s
    RETURNING id
), added AS (
    INSERT INTO jobqueue_jobs ({new_columns})
    SELECT id, %(type)s, payload, {new_values} FROM wanted
    WHERE CASE WHEN %(unique_for_s)s::float8 IS NULL
               THEN NOT EXISTS (SELECT FROM jobqueue_held AS held
                                WHERE held.id = wanted.id AND held.held_until > %(now)s)
               ELSE wanted.id IN (SELECT id FROM gate) END
    ORDER BY n
    ON CONFLICT (id) DO NOTHING
    -- No NOTIFY here: on the queue's own connection the `notify` statement follows the
    -- commit; in a caller's transaction none is sent (see PostgresQueue.enqueue).
    RETURNING id
)
SELECT wanted.id, added.id IS NOT NULL, gate.id IS NOT NULL, old.*
FROM wanted
LEFT JOIN added ON added.id = wanted.id
LEFT JOIN gate ON gate.id = wanted.id
LEFT JOIN LATERAL (  -- OFFSET 0 keeps it a lookup by key, run only for a skipped id
    SELECT {job_columns} FROM jobqueue_jobs AS held WHERE held.id = wanted.id AND added.id IS NULL
    OFFSET 0
) AS old ON true
ORDER BY wanted.n;

-- name: enqueue_fresh
-- The common case, on the queue's own connection: every job takes job-N from the sequence.
-- No ON CONFLICT, no lookup of held jobs: a third less server time than `enqueue`. A job-N
-- someone chose by hand makes the whole statement fail (a unique violation, nothing
-- written), and the batch goes through `enqueue` instead. The ids come back in the order of
-- the payloads from `wanted`, not from the insert, whose order SQL does not promise.
WITH wanted AS MATERIALIZED (
    SELECT n, 'job-' || nextval('jobqueue_job_id') AS id, payload
    FROM (SELECT generate_subscripts(%(payloads)b::text[], 1) AS n, unnest(%(payloads)b::text[]) AS payload) AS w
), added AS (
    INSERT INTO jobqueue_jobs ({new_columns})
    SELECT id, %(type)s, payload, {new_values} FROM wanted ORDER BY n
)
SELECT id FROM wanted ORDER BY n;

-- name: enqueue_one
-- `enqueue_fresh` of one job, its payload as it is rather than in a list: no array to build
-- and unnest (measured on one-job enqueues: about 29 us less of the client's CPU and 22 us
-- less of the server's, on an enqueue of about 130 and 150 us).
INSERT INTO jobqueue_jobs ({new_columns})
VALUES ('job-' || nextval('jobqueue_job_id'), %(type)s, %(payload)s, {new_values})
RETURNING id;

-- name: notify
-- Wakes listening workers once the queue's own enqueue has committed, in a transaction of
-- its own that does not wait for the disk (a lost notification is a hint lost: workers
-- poll). Inside the enqueue it would cost concurrency: PostgreSQL serialises the commits
-- of transactions that notify (one lock for the whole server, held until the commit is on
-- disk), so producers enqueueing at once would take turns at the disk.
SELECT set_config('synchronous_commit', 'off', true), pg_notify('jobqueue_jobs', '');

-- name: held
-- The ids a unique window holds now: their job finished (or lives, held_until infinite).
SELECT id, type, payload FROM jobqueue_held WHERE id = ANY(%(ids)b::text[]) AND held_until > %(now)s;

-- name: unhold_live
-- Ids the enqueue's `gate` took for a job that a job without a window already held.
DELETE FROM jobqueue_held WHERE id = ANY(%(ids)b::text[]) AND held_until = 'Infinity';

-- name: hold_finished
-- Every way a job enqueued with a window finishes runs this in its transaction: the window
-- starts at %(now)s (jobqueue.backends.rules.held_until). An ack after its delete: an
-- enqueue that took the held row first (to refuse the id) makes the ack wait for it.
UPDATE jobqueue_held SET held_until = %(now)s + unique_for_s
WHERE id = ANY(%(ids)b::text[]) AND held_until = 'Infinity';

-- name: prune_held
DELETE FROM jobqueue_held WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM jobqueue_held WHERE held_until < %(before)s ORDER BY held_until LIMIT %(limit)s
));

-- name: find
SELECT {job_columns} FROM jobqueue_jobs WHERE id = ANY(%(ids)b::text[]);

-- name: claim
-- `/* due */` becomes the `due` CTE, which picks the due jobs of highest priority,
-- claimable longest among equals, and locks them; SKIP LOCKED passes over rows another
-- worker's claim has locked, so workers never wait for each other or get the same job. Two
-- forms (postgres.SKIP_SCAN_VERSION): `due_in_index_order` on PostgreSQL 18 and later,
-- `due_by_priority` on older servers and behind a transaction pooler (`WITH RECURSIVE` is
-- for its walk; the other form has no recursive CTE, and the word changes nothing there).
-- Keeping the pick in a CTE fences the planner: the LIMIT applies before the update, never
-- to more rows. A due job whose final attempt's lease ran out (spent), or whose deadline
-- has passed (expired, no attempt used), is not leased but returned with `ended` true, for
-- `bury_due` right after; a job cancelled while leased, whose lease ran out (its holder
-- never acked nor failed it), is returned with `cancelled` true, for `drop_cancelled`. Both
-- are rare: the update writes a new version of their rows with the same values, so that one
-- write returns them beside the jobs it leases; another write in this statement, or a list
-- of them beside the rows (the statement's top level a SELECT over the update's rows, kept
-- in a CTE), cost every claim even with nothing to bury (a claim of 100: about 2 us of
-- server time per job).
-- `/* lease */` becomes the lease written on the jobs picked: `lease_in_claim_order` here,
-- `lease_one` in `claim_one`, this statement for one job (PostgresQueue.claim_many).
-- `/* types */` becomes a worker's filter in `claim_types` (PostgresQueue.claim_many): a
-- statement of its own, so a claim of any type plans as it did without one. (One statement
-- for both, `$types IS NULL OR type = ANY($types)`, made every claim 3-4x slower.) The
-- claims from named queues are made from this one the same way (_claim_statement in
-- postgres.py): from one queue, the pick reads that queue's range of
-- jobqueue_jobs_queue_claim (and in `due_by_priority`, `priorities` walks that queue's
-- priorities there).
-- `no_disk_wait` makes this statement's own transaction commit without waiting for the WAL
-- to reach the disk (`%(commit)s` is 'off': synchronous_commit off, for this transaction
-- only): a claim lost in a server crash leaves its job claimable again, which
-- at-least-once allows (see PostgresQueue.claim_many). Enqueue and ack keep waiting for the disk.
-- Behind a transaction pooler it is 'on', and claims wait for the disk too: there
-- `fencing_floor` is not taken again after a crash, so no claim may lose the sequence's
-- numbers.
-- The rows come in no promised order: the caller sorts the leased by serial, which is claim order.
WITH RECURSIVE no_disk_wait AS MATERIALIZED (
    SELECT set_config('synchronous_commit', %(commit)s, true)
/* due */
/* lease */
RETURNING {job_columns}, job.lease_token, job.serial, lease.ended, lease.cancelled;

-- name: due_in_index_order
-- The `due` of `claim` on PostgreSQL 18 and later, on the queue's own connection, whose
-- session settings (generic_plans) keep the plan on the index: the due jobs read in the
-- claim index's own order. The index begins with the priority, and `visible_at <= now`
-- bounds its second column: 18's skip scan hops from one priority to the next within the
-- index, so a claim reads about as many entries as it takes, however many jobs of a higher
-- priority wait out a backoff or a lease (benchmarks/postgres_claim_index.py). One scan in
-- one statement: on 18 it costs the server about 10 us less per one-job claim than
-- `due_by_priority`, and about 2.7 us less per job in a claim of 100
-- (benchmarks/README.md, 2026-12-03).
), due AS MATERIALIZED (
    SELECT ctid AS due_ctid, id AS due_id, priority AS due_priority, visible_at AS due_visible_at,
           serial AS due_serial,
           attempts >= max_attempts AS spent, coalesce(expires_at < %(now)s, false) AS expired,
           cancelled
    FROM jobqueue_jobs
    WHERE died_at IS NULL AND visible_at <= %(now)s
      /* types */
    ORDER BY priority DESC, visible_at, serial
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED

-- name: due_by_priority
-- The `due` of `claim` on PostgreSQL 17 and older, which have no skip scan, and behind a
-- transaction pooler (see due_in_index_order): read in the index's own order, the scan
-- could not stop at a priority's first job not yet due, and would read the index entry of
-- every job in backoff or leased of every higher priority before the first due job of a
-- lower one. So it reads the claim index one priority at a time (a loose index scan):
-- `priorities` walks the distinct priorities of the live jobs from the highest, one index
-- descent each, and for each the LATERAL pick reads the range of that priority's due jobs,
-- which starts at its first due job and ends at the first not yet due. The outer LIMIT
-- stops the walk, the next priority is looked up only when this one runs short, and the
-- nested loop returns the jobs in claim order.
), priorities AS ({live_priorities}), due AS MATERIALIZED (
    SELECT due_ctid, due_id, due_priority, due_visible_at, due_serial, spent, expired, cancelled
    FROM priorities, LATERAL (
        SELECT ctid AS due_ctid, id AS due_id, priority AS due_priority, visible_at AS due_visible_at,
               serial AS due_serial,
               attempts >= max_attempts AS spent, coalesce(expires_at < %(now)s, false) AS expired,
               cancelled
        FROM jobqueue_jobs
        WHERE died_at IS NULL AND priority = priorities.priority AND visible_at <= %(now)s
          /* types */
        ORDER BY visible_at, serial
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) AS one_priority
    LIMIT %(limit)s

-- name: lease_in_claim_order
-- The end of `claim` for any limit (its `/* lease */`): `lease` numbers the jobs to lease in
-- claim order: each gets its new serial (its place once the lease runs out), its lease
-- token and its fencing token there, in that order; a job to bury or drop gets none, and
-- the update writes its row again with the same values (`claim`). The update finds its rows
-- by `ctid`, where `due` locked them: a TID scan, in a nested loop over `lease` (on the
-- queue's own connection a sequential scan is priced out, see generic_plans). A row another
-- session updated after this statement's snapshot, and that still met `due`'s conditions,
-- is locked in its new version, which this update cannot see: it drops out, and the claim
-- returns one job short (rare: another claim that rewrote a job to bury or drop).
), lease AS MATERIALIZED (
    -- nextval runs after the ORDER BY (PostgreSQL evaluates volatile output columns last)
    SELECT due_ctid AS at, runnable, (spent OR expired) AND NOT cancelled AS ended, cancelled,
           CASE WHEN runnable THEN nextval('jobqueue_serial') END AS new_serial,
           CASE WHEN runnable THEN 'lease-' || nextval('jobqueue_lease') END AS token,
           CASE WHEN runnable THEN nextval('jobqueue_fencing') END AS fencing
    FROM (SELECT *, NOT (spent OR expired OR cancelled) AS runnable FROM due) AS due
    ORDER BY due_priority DESC, due_visible_at, due_serial
)
UPDATE jobqueue_jobs AS job
SET attempts = CASE WHEN lease.runnable THEN job.attempts + 1 ELSE job.attempts END,
    leased_until = CASE WHEN lease.runnable THEN %(until)s ELSE job.leased_until END,
    leased_at = CASE WHEN lease.runnable THEN %(now)s ELSE job.leased_at END,
    visible_at = CASE WHEN lease.runnable THEN %(until)s ELSE job.visible_at END,
    lease_token = coalesce(lease.token, job.lease_token), serial = coalesce(lease.new_serial, job.serial),
    fencing_token = coalesce(lease.fencing, job.fencing_token)
FROM no_disk_wait, lease
WHERE job.ctid = lease.at

-- name: lease_one
-- The end of `claim_one`, `claim` with the limit 1 written in (PostgresQueue.claim_many):
-- one job needs no order among the leased, so the update joins `due` directly, a TID scan
-- that the planner, told of one row, always chooses, and draws the job's numbers itself.
), lease AS (
    SELECT due_ctid AS at, NOT (spent OR expired OR cancelled) AS runnable,
           (spent OR expired) AND NOT cancelled AS ended, cancelled
    FROM due
)
UPDATE jobqueue_jobs AS job
SET attempts = CASE WHEN lease.runnable THEN job.attempts + 1 ELSE job.attempts END,
    leased_until = CASE WHEN lease.runnable THEN %(until)s ELSE job.leased_until END,
    leased_at = CASE WHEN lease.runnable THEN %(now)s ELSE job.leased_at END,
    visible_at = CASE WHEN lease.runnable THEN %(until)s ELSE job.visible_at END,
    lease_token = CASE WHEN lease.runnable THEN 'lease-' || nextval('jobqueue_lease') ELSE job.lease_token END,
    serial = CASE WHEN lease.runnable THEN nextval('jobqueue_serial') ELSE job.serial END,
    fencing_token = CASE WHEN lease.runnable THEN nextval('jobqueue_fencing') ELSE job.fencing_token END
FROM no_disk_wait, lease
WHERE job.ctid = lease.at

-- name: bury_due
-- The jobs a claim found due but not to run (its rows with `ended`): a final attempt whose lease
-- ran out, or a deadline passed (no attempt used), dead-lettered with the reason. Each
-- condition is checked again: another worker's claim may have buried the job since, or its
-- holder's late ack or fail finished it.
UPDATE jobqueue_jobs AS job
SET died_at = %(now)s, leased_until = NULL, leased_at = NULL, lease_token = NULL,
    last_error = CASE WHEN job.attempts >= job.max_attempts THEN {lease_lost_reason} ELSE {expiry_reason} END
WHERE job.id = ANY(%(ids)b::text[]) AND job.died_at IS NULL AND NOT job.cancelled AND job.visible_at <= %(now)s
  AND (job.attempts >= job.max_attempts OR job.expires_at < %(now)s)
RETURNING job.id;

-- name: drop_cancelled
-- The jobs a claim found cancelled while leased with their lease run out (its rows with
-- `cancelled`), moved to jobqueue_finished as cancelled, their unique windows started
-- (hold_finished). Each condition is checked again: the holder's late ack or fail may have
-- finished the job since (finish_cancelled), or another worker's claim and drop.
WITH dropped AS (
    DELETE FROM jobqueue_jobs AS job
    WHERE job.id = ANY(%(ids)b::text[]) AND job.cancelled AND job.died_at IS NULL AND job.visible_at <= %(now)s
    RETURNING job.*
), kept AS (
    INSERT INTO jobqueue_finished ({job_columns}, outcome, finished_at)
    SELECT {job_columns}, 'cancelled', %(now)s FROM dropped
), held AS (  -- the unique windows of those finished (an empty list reads nothing)
    UPDATE jobqueue_held SET held_until = %(now)s + unique_for_s
    WHERE id = ANY(ARRAY(SELECT id FROM dropped WHERE unique_for_s IS NOT NULL)) AND held_until = 'Infinity'
)
SELECT count(*) FROM dropped;

-- name: ack
-- The token alone is never trusted: it must be the current lease of that very job. A dead
-- job holds no token (every statement that dead-letters a job clears it), so the token
-- match leaves dead jobs alone without `died_at IS NULL`, which would lead the planner
-- astray: on a table not yet analysed it guesses that condition true of 1 row in 200, and
-- then reads every live job through the claim index and hashes them, on every ack.
-- `job.id = ANY(...)` finds the rows by primary key. A job cancelled while leased is left to
-- `finish_cancelled`: its token does not come back. Here and in every statement that changes
-- a leased job, the holder is named by its lease token and its fencing token both: a claim
-- lost in a server crash can hand its lease token out again (see PostgresQueue.claim_many),
-- never its fencing token, so the crashed claim's holder cannot ack, fail, extend or give
-- back the new holder's lease.
DELETE FROM jobqueue_jobs AS job
USING (SELECT unnest(%(ids)b::text[]) AS id, unnest(%(tokens)b::text[]) AS token,
              unnest(%(fencings)b::bigint[]) AS fencing) AS held
WHERE job.id = ANY(%(ids)b::text[]) AND job.id = held.id AND job.lease_token = held.token
  AND job.fencing_token = held.fencing AND NOT job.cancelled
RETURNING job.lease_token;

-- name: ack_one
-- `ack` of one lease, its values as they are rather than in lists: no arrays to build and
-- unnest (measured: about 20 us less of the client's CPU and 15 us less of the server's
-- per ack, on an ack of about 200 us in all).
DELETE FROM jobqueue_jobs AS job
WHERE job.id = %(id)s AND job.lease_token = %(token)s AND job.fencing_token = %(fencing)s AND NOT job.cancelled
RETURNING job.lease_token;

-- name: ack_keep
-- `ack` for a queue that keeps finished jobs (retain_s > 0): the deleted rows go to
-- jobqueue_finished in the same statement, marked done at %(now)s.
WITH gone AS (
    DELETE FROM jobqueue_jobs AS job
    USING (SELECT unnest(%(ids)b::text[]) AS id, unnest(%(tokens)b::text[]) AS token,
                  unnest(%(fencings)b::bigint[]) AS fencing) AS held
    WHERE job.id = ANY(%(ids)b::text[]) AND job.id = held.id AND job.lease_token = held.token
      AND job.fencing_token = held.fencing
      AND NOT job.cancelled
    RETURNING job.*
), kept AS (
    INSERT INTO jobqueue_finished ({job_columns}, outcome, finished_at)
    SELECT {job_columns}, 'done', %(now)s FROM gone
)
SELECT lease_token FROM gone;

-- name: finish_cancelled
-- The jobs held under these leases and cancelled while leased, moved to jobqueue_finished as
-- cancelled at %(now)s, %(error)s (the failed attempt's, or NULL after an ack) as their
-- last error. Run only when an ack found fewer jobs than it was given, or by a fail.
WITH gone AS (
    DELETE FROM jobqueue_jobs AS job
    USING (SELECT unnest(%(ids)b::text[]) AS id, unnest(%(tokens)b::text[]) AS token,
                  unnest(%(fencings)b::bigint[]) AS fencing) AS held
    WHERE job.id = ANY(%(ids)b::text[]) AND job.id = held.id AND job.lease_token = held.token
      AND job.fencing_token = held.fencing AND job.cancelled
    RETURNING job.*
), kept AS (
    INSERT INTO jobqueue_finished ({job_columns}, outcome, finished_at)
    SELECT {job_columns_with_error}, 'cancelled', %(now)s FROM gone
)
SELECT lease_token FROM gone;

-- name: cancel_lock
-- The live job queue.cancel looks at, locked: a claim that locked it first has leased it by
-- the time this returns, and one that comes later skips it (SKIP LOCKED).
SELECT lease_token IS NOT NULL FROM jobqueue_jobs WHERE id = %(id)s AND died_at IS NULL FOR UPDATE;

-- name: mark_cancelled
UPDATE jobqueue_jobs SET cancelled = true WHERE id = %(id)s AND died_at IS NULL;

-- name: cancel_waiting
WITH gone AS (
    DELETE FROM jobqueue_jobs WHERE id = %(id)s AND died_at IS NULL RETURNING *
)
INSERT INTO jobqueue_finished ({job_columns}, outcome, finished_at)
SELECT {job_columns}, 'cancelled', %(now)s FROM gone;

-- name: ended
-- What became of a job no longer live: dead, or kept finished (the latest, if kept twice).
-- jobqueue_finished has no index on id: read whole, which cancel (no hot path) affords.
(SELECT 'dead' FROM jobqueue_jobs WHERE id = %(id)s AND died_at IS NOT NULL)
UNION ALL
(SELECT outcome FROM jobqueue_finished WHERE id = %(id)s ORDER BY finished_at DESC LIMIT 1)
LIMIT 1;

-- name: prune_finished
-- At most %(limit)s finished jobs kept since before %(before)s (cancelled ones: since before
-- %(cancelled_before)s, which is earlier), oldest first, through jobqueue_finished_at: a short
-- statement, whatever the table holds.
DELETE FROM jobqueue_finished WHERE ctid = ANY(ARRAY(
    SELECT ctid FROM jobqueue_finished WHERE finished_at < %(before)s
      AND (outcome <> 'cancelled' OR finished_at < %(cancelled_before)s)
    ORDER BY finished_at LIMIT %(limit)s
));

-- name: prune_dead
-- At most %(limit)s dead letters that died before %(before)s (jobqueue.backends.rules.is_dead_pruned),
-- oldest death first, through jobqueue_jobs_dead: a short statement, whatever the table
-- holds. The outer died_at test leaves alone a row replayed since the array was read. Each
-- letter frees its id as a discard does: a unique window counts from its death.
WITH gone AS (
    DELETE FROM jobqueue_jobs WHERE ctid = ANY(ARRAY(
        SELECT ctid FROM jobqueue_jobs WHERE died_at IS NOT NULL AND died_at < %(before)s
        ORDER BY died_at, id LIMIT %(limit)s
    )) AND died_at < %(before)s
    RETURNING id, died_at
)
UPDATE jobqueue_held AS held SET held_until = gone.died_at + held.unique_for_s
FROM gone WHERE held.id = gone.id AND held.held_until = 'Infinity';

-- name: finished
SELECT {job_columns}, outcome, finished_at FROM jobqueue_finished ORDER BY finished_at DESC LIMIT %(limit)s;

-- name: holder
SELECT {job_columns}, lease_token, cancelled FROM jobqueue_jobs WHERE id = %(id)s AND died_at IS NULL;

-- name: retry
UPDATE jobqueue_jobs
SET run_at = %(run_at)s, visible_at = %(run_at)s, leased_until = NULL, leased_at = NULL,
    lease_token = NULL, last_error = %(error)s, serial = nextval('jobqueue_serial')
WHERE id = %(id)s AND lease_token = %(token)s AND fencing_token = %(fencing)s AND died_at IS NULL
RETURNING id;

-- name: bury
UPDATE jobqueue_jobs
SET died_at = %(now)s, leased_until = NULL, leased_at = NULL, lease_token = NULL,
    last_error = %(error)s
WHERE id = %(id)s AND lease_token = %(token)s AND fencing_token = %(fencing)s AND died_at IS NULL
RETURNING id;

-- name: bury_unreadable
-- A row that cannot become a Job (a value corrupted in the table) is dead-lettered as its
-- salvaged stand-in (jobqueue.backends.rows.salvage): the reason, which quotes the bad value, and
-- readable values in place of the bad ones, so that the dead letter itself can be read.
UPDATE jobqueue_jobs
SET died_at = %(now)s, leased_until = NULL, leased_at = NULL, lease_token = NULL,
    last_error = %(error)s, attempts = %(attempts)s, max_attempts = %(max_attempts)s,
    base_s = %(base_s)s, cap_s = %(cap_s)s, run_at = %(run_at)s, priority = %(priority)s,
    expires_at = %(expires_at)s, expires_after_s = %(expires_after_s)s, enqueued_at = %(enqueued_at)s,
    queue = %(queue)s
WHERE id = %(id)s AND died_at IS NULL;

-- name: extend
-- A heartbeat commits without waiting for the disk, as a claim does (`no_disk_wait`): an
-- extension lost in a crash only leaves the shorter lease, and at worst a second run.
WITH no_disk_wait AS MATERIALIZED (
    SELECT set_config('synchronous_commit', 'off', true)
)
UPDATE jobqueue_jobs
SET leased_until = %(until)s, visible_at = greatest(run_at, %(until)s), serial = nextval('jobqueue_serial')
FROM no_disk_wait
WHERE id = %(id)s AND lease_token = %(token)s AND fencing_token = %(fencing)s AND died_at IS NULL
RETURNING {job_columns}, cancelled;

-- name: release
UPDATE jobqueue_jobs
SET attempts = %(attempts)s, run_at = %(run_at)s, visible_at = %(run_at)s, leased_until = NULL,
    leased_at = NULL, lease_token = NULL, serial = nextval('jobqueue_serial')
WHERE id = %(id)s AND lease_token = %(token)s AND fencing_token = %(fencing)s AND died_at IS NULL
-- A job given back due now wakes a listening worker; one given back for later (a deferral)
-- does not: nobody could take it yet.
RETURNING {job_columns}, CASE WHEN %(wake)s THEN pg_notify('jobqueue_jobs', '') END;

-- name: snooze
-- A release that counts, refused (no row) once the job has used its snoozes (%(most)s).
UPDATE jobqueue_jobs
SET attempts = %(attempts)s, run_at = %(run_at)s, visible_at = %(run_at)s, leased_until = NULL,
    leased_at = NULL, lease_token = NULL, serial = nextval('jobqueue_serial'), snoozes = snoozes + 1
WHERE id = %(id)s AND lease_token = %(token)s AND fencing_token = %(fencing)s AND died_at IS NULL AND snoozes < %(most)s
RETURNING {job_columns};

-- name: dead_letter
-- The dead letter a replay starts from, locked until the replay's transaction ends.
SELECT {dead_columns} FROM jobqueue_jobs WHERE id = %(id)s AND died_at IS NOT NULL FOR UPDATE;

-- name: replay
-- What jobqueue.backends.rules.replay made of the dead letter: due now, no attempt used, a
-- fresh deadline, enqueued anew.
UPDATE jobqueue_jobs
SET died_at = NULL, attempts = %(attempts)s, run_at = %(run_at)s, visible_at = %(run_at)s, leased_until = NULL,
    leased_at = NULL, lease_token = NULL, serial = nextval('jobqueue_serial'), expires_at = %(expires_at)s,
    snoozes = 0, enqueued_at = %(enqueued_at)s
WHERE id = %(id)s AND died_at IS NOT NULL
RETURNING {job_columns}, pg_notify('jobqueue_jobs', '');

-- name: discard
DELETE FROM jobqueue_jobs WHERE id = %(id)s AND died_at IS NOT NULL
RETURNING {dead_columns};

-- name: get
SELECT {job_columns} FROM jobqueue_jobs WHERE id = %(id)s AND died_at IS NULL;

-- name: jobs
SELECT {job_columns} FROM jobqueue_jobs WHERE died_at IS NULL ORDER BY visible_at, serial;

-- name: dead_letters
SELECT {dead_columns} FROM jobqueue_jobs WHERE died_at IS NOT NULL ORDER BY died_at, id;

-- name: next_visible_at
SELECT min(visible_at) FROM jobqueue_jobs WHERE died_at IS NULL;

-- name: count
SELECT count(*) FROM jobqueue_jobs WHERE died_at IS NULL;

-- name: metrics
SELECT count(*) FILTER (WHERE died_at IS NULL AND visible_at <= %(now)s),
       count(*) FILTER (WHERE died_at IS NULL AND visible_at > %(now)s
                        AND coalesce(leased_until <= %(now)s, true)),
       count(*) FILTER (WHERE died_at IS NULL AND leased_until > %(now)s),
       coalesce(max(%(now)s - visible_at) FILTER (WHERE died_at IS NULL AND visible_at <= %(now)s), 0.0),
       coalesce(max(%(now)s - leased_at) FILTER (WHERE died_at IS NULL AND leased_until > %(now)s), 0.0),
       coalesce(max(%(now)s - coalesce(enqueued_at, run_at))
                FILTER (WHERE died_at IS NULL AND coalesce(leased_until <= %(now)s, true)), 0.0),
       count(*) FILTER (WHERE died_at IS NOT NULL),
       (SELECT coalesce(sum(done), 0) FROM jobqueue_outcomes_by_key WHERE second BETWEEN %(since)s AND %(now)s)
       + (SELECT coalesce(sum(done), 0) FROM jobqueue_outcomes WHERE second BETWEEN %(since)s AND %(now)s),
       (SELECT coalesce(sum(failed), 0) FROM jobqueue_outcomes_by_key WHERE second BETWEEN %(since)s AND %(now)s)
       + (SELECT coalesce(sum(failed), 0) FROM jobqueue_outcomes WHERE second BETWEEN %(since)s AND %(now)s),
       -- the cancelled jobs kept, through jobqueue_finished_cancelled
       (SELECT count(*) FROM jobqueue_finished WHERE outcome = 'cancelled')
FROM jobqueue_jobs;

-- name: count_outcomes
-- The rows come sorted by key, so two processes adding to the same rows lock them in the same order.
INSERT INTO jobqueue_outcomes_by_key (second, type, queue, done, failed)
SELECT unnest(%(seconds)s::bigint[]), unnest(%(types)b::text[]), unnest(%(queues)b::text[]),
       unnest(%(done)s::bigint[]), unnest(%(failed)s::bigint[])
ON CONFLICT (second, type, queue) DO UPDATE
SET done = jobqueue_outcomes_by_key.done + excluded.done, failed = jobqueue_outcomes_by_key.failed + excluded.failed;

-- name: forget_outcomes
-- jobqueue_outcomes: the counts of before migration 10, and of older workers still running.
WITH older AS (
    DELETE FROM jobqueue_outcomes WHERE second < %(before)s
)
DELETE FROM jobqueue_outcomes_by_key WHERE second < %(before)s;

-- The dashboard's reads (jobqueue.backends.contract.ShowsOverview): a refresh every 2 s must
-- not read every job. Counting 1,000,000 rows takes this server about 150 ms, so each state
-- is counted one by one only up to a bound, through an index where one serves, and a state
-- with more jobs is estimated from a sample of the table (census_sampled).

-- name: census_bounded
-- At most `bound` rows of each range: waiting and the rest of the live jobs (scheduled or
-- leased) through the claim index on visible_at, the dead through jobqueue_jobs_dead. A range
-- that fills its bound has more jobs than the exact count allows. Each ORDER BY is its
-- index's order, so the planner reads the index even where enable_seqscan is on (behind a
-- transaction pooler): a sequential scan would read every job to find a few leased ones
-- (tests/test_overview.py reads the plans).
-- The waiting range, the one that is long when a backlog builds, is counted first, reading
-- no column of its rows (`waiting_n`), and read by queue and type only if it did not fill its
-- bound (the condition on `waiting_n` gates the second scan, run or not as a whole); past its
-- bound it returns its count alone, and the caller estimates it from a sample. Read by queue
-- and type at once, it cost the server the queue of each of its rows, the last column of a
-- job's row, for rows then set aside: with 1,000,000 jobs waiting this statement took 3.2 ms
-- that way and takes 1.1 ms this way on PostgreSQL 18 (the medians of 20; benchmarks/README.md,
-- the session of 2026-12-03 18:59). Within its bound the range is read twice, the first time
-- without its rows' columns. The other ranges are read once: on a server without skip scan
-- (before PostgreSQL 18) reaching the scheduled and leased jobs in the claim index means
-- walking past the waiting ones, which a second read would walk again (counting them first
-- too took the statement on 16 from 12.2 to 20.6 ms; this way, 11.2 ms).
WITH waiting_n AS MATERIALIZED (
    SELECT count(*) AS n FROM (
        SELECT FROM jobqueue_jobs WHERE died_at IS NULL AND visible_at <= %(now)s
        ORDER BY priority DESC, visible_at, serial LIMIT %(bound)s
    ) AS range
), waiting AS (
    SELECT queue, type FROM jobqueue_jobs
    WHERE died_at IS NULL AND visible_at <= %(now)s AND (SELECT n FROM waiting_n) < %(bound)s
    ORDER BY priority DESC, visible_at, serial LIMIT %(bound)s
), later AS (
    SELECT queue, type, leased_until > %(now)s AS leased FROM jobqueue_jobs
    WHERE died_at IS NULL AND visible_at > %(now)s ORDER BY priority DESC, visible_at, serial LIMIT %(bound)s
), dead AS (
    SELECT queue, type FROM jobqueue_jobs WHERE died_at IS NOT NULL ORDER BY died_at, id LIMIT %(bound)s
)
SELECT 'waiting', NULL, NULL, n FROM waiting_n WHERE n >= %(bound)s
UNION ALL
SELECT 'waiting', queue, type, count(*) FROM waiting GROUP BY queue, type
UNION ALL
SELECT CASE WHEN leased THEN 'leased' ELSE 'scheduled' END, queue, type, count(*) FROM later GROUP BY 1, 2, 3
UNION ALL
SELECT 'dead', queue, type, count(*) FROM dead GROUP BY queue, type
UNION ALL  -- exact: kept a day (rules.KEEP_CANCELLED_S), few
SELECT 'cancelled', queue, type, count(*) FROM jobqueue_finished WHERE outcome = 'cancelled' GROUP BY queue, type;

-- name: table_pages
-- The table's size in pages now, and its rows per page at the last ANALYZE (0 before one).
SELECT pg_relation_size('jobqueue_jobs') / current_setting('block_size')::bigint,
       CASE WHEN relpages > 0 AND reltuples > 0 THEN reltuples / relpages ELSE 0 END
FROM pg_class WHERE oid = 'jobqueue_jobs'::regclass;

-- name: census_sampled
-- Every state by type in a sample of `percent` per cent of the table's pages (TABLESAMPLE SYSTEM:
-- each page taken or not at random, so each count times 100 / percent estimates the whole table).
SELECT CASE WHEN died_at IS NOT NULL THEN 'dead' WHEN leased_until > %(now)s THEN 'leased'
            WHEN visible_at > %(now)s THEN 'scheduled' ELSE 'waiting' END,
       queue, type, count(*) * 100.0 / %(percent)s
FROM jobqueue_jobs TABLESAMPLE SYSTEM (%(percent)s) GROUP BY 1, 2, 3;

-- name: oldest_enqueued
-- The census's age since enqueue, run only while every count is exact (a bounded number of
-- live jobs): no index orders the jobs by enqueue time, so this reads every live job.
SELECT coalesce(max(%(now)s - coalesce(enqueued_at, run_at)), 0.0) FROM jobqueue_jobs
WHERE died_at IS NULL AND coalesce(leased_until <= %(now)s, true);

-- name: oldest_waiting
-- The oldest due job of each priority, the first entry of its range in the claim index: the
-- priorities in use are found by hopping through the index (one probe each), not by a scan.
WITH RECURSIVE priorities AS ({live_priorities})
SELECT coalesce(max(%(now)s - first.visible_at), 0.0)
FROM priorities, LATERAL (
    SELECT visible_at FROM jobqueue_jobs AS job
    WHERE job.died_at IS NULL AND job.priority = priorities.priority AND job.visible_at <= %(now)s
    ORDER BY job.visible_at LIMIT 1
) AS first;

-- name: leased_jobs
-- A leased job's visible_at is its lease's end: the claim index's range after now holds the
-- leased and the scheduled jobs, and only those are read.
SELECT {job_columns} FROM jobqueue_jobs
WHERE died_at IS NULL AND visible_at > %(now)s AND leased_until > %(now)s
ORDER BY leased_until, id LIMIT %(limit)s;

-- name: newest_dead_letters
-- jobqueue_jobs_dead read backwards: the latest deaths, without reading the others.
SELECT {dead_columns} FROM jobqueue_jobs WHERE died_at IS NOT NULL ORDER BY died_at DESC, id DESC
LIMIT %(limit)s;

-- name: outcome_sums
-- The dashboard's two sums of one span in one statement: by second (type and queue NULL),
-- then by type and queue (second NULL).
WITH counted AS (
    SELECT second, type, queue, done, failed FROM jobqueue_outcomes_by_key
    WHERE second BETWEEN %(since)s AND %(until)s
    UNION ALL  -- counted before migration 10, or by an older worker: under no type or queue
    SELECT second, '', '', done, failed FROM jobqueue_outcomes WHERE second BETWEEN %(since)s AND %(until)s
)
SELECT second, NULL::text, NULL::text, sum(done), sum(failed) FROM counted GROUP BY second
UNION ALL
SELECT NULL::bigint, type, queue, sum(done), sum(failed) FROM counted GROUP BY type, queue;

-- name: cleanup_held_back
-- What holds back vacuum on the queue's table (jobqueue.cleanup): the table's dead and live
-- rows and its last autovacuum, beside the oldest transaction of another client session of
-- this database that still has a snapshot (backend_xmin) or a transaction id (backend_xid).
-- Since PostgreSQL 14 only sessions of the same database hold back vacuum of its tables.
-- This statement's own session is left out (its snapshot is the statement's), and so are
-- the queues' wake-ups (`notify`: a transaction of its own, over in microseconds, which a
-- thread sends a moment after an enqueue: seen here, it would name a holder that is gone
-- by the time anyone looks). Sessions of
-- other roles show their backend_xmin only to a role with pg_read_all_stats (or a
-- superuser): without it they are not seen here.
SELECT stats.n_dead_tup, stats.n_live_tup,
       extract(epoch FROM statement_timestamp() - stats.last_autovacuum)::float8,
       holder.pid, holder.application_name, holder.state, holder.age_s
FROM pg_stat_user_tables AS stats
LEFT JOIN LATERAL (
    SELECT pid, coalesce(application_name, '') AS application_name, coalesce(state, '') AS state,
           greatest(extract(epoch FROM statement_timestamp() - xact_start)::float8, 0.0) AS age_s
    FROM pg_stat_activity
    WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()
      AND (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL)
      AND NOT (state = 'active' AND query LIKE '%pg_notify(''jobqueue_jobs''%')
    ORDER BY greatest(age(backend_xmin), age(backend_xid)) DESC, xact_start
    LIMIT 1
) AS holder ON true
WHERE stats.relid = 'jobqueue_jobs'::regclass;
