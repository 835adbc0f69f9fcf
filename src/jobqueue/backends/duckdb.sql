-- The SQL of jobqueue.backends.duckdb.DurableQueue, one named block per statement; a block
-- named as one of postgres.sql does the same operation there.
-- Parameters are named ($now, $ids...); times are seconds from the queue's clock, never now().
-- {job_columns} and {dead_columns} stand for the select lists jobqueue.backends.rows reads
-- rows with, {dead_stored} for a dead letter's columns but died_at, {new_columns} and
-- {new_values} for what an enqueue fills, {lease_lost_reason} and {expiry_reason} for the
-- reasons jobqueue.backends.rules.refusal gives (all filled in when this file is loaded:
-- fixed SQL, never values).

-- name: has_schema
SELECT count(*) > 0 FROM duckdb_tables()
WHERE table_name = 'jobqueue_schema' AND database_name = current_database() AND schema_name = current_schema();

-- name: schema_version
SELECT version FROM jobqueue_schema;

-- The migrations: block migration_N takes the tables from version N - 1 to N, and records N.
-- A new file runs them all, and so does a file written before the tables recorded their
-- version: every step is IF NOT EXISTS, so it skips what such a file has. Columns added
-- later come at the end of their table, so statements always name their columns. No
-- parameters.

-- name: migration_1
-- Lesson 11's tables.
CREATE TABLE IF NOT EXISTS jobqueue_schema (version INTEGER NOT NULL);
CREATE SEQUENCE IF NOT EXISTS jobqueue_serial;
CREATE SEQUENCE IF NOT EXISTS jobqueue_lease;
CREATE SEQUENCE IF NOT EXISTS jobqueue_job_id;
CREATE TABLE IF NOT EXISTS jobqueue_jobs (
    id VARCHAR USING COMPRESSION uncompressed PRIMARY KEY,
    type VARCHAR NOT NULL,
    payload VARCHAR NOT NULL,
    attempts INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL,
    base_s DOUBLE NOT NULL,
    cap_s DOUBLE NOT NULL,
    run_at DOUBLE NOT NULL,
    leased_until DOUBLE,
    lease_token VARCHAR,
    last_error VARCHAR,
    visible_at DOUBLE NOT NULL,
    serial BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS jobqueue_dead (
    id VARCHAR PRIMARY KEY,
    type VARCHAR NOT NULL,
    payload VARCHAR NOT NULL,
    attempts INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL,
    base_s DOUBLE NOT NULL,
    cap_s DOUBLE NOT NULL,
    run_at DOUBLE NOT NULL,
    last_error VARCHAR,
    died_at DOUBLE NOT NULL
);
CREATE TABLE IF NOT EXISTS jobqueue_outcomes (
    second BIGINT PRIMARY KEY,
    done BIGINT NOT NULL,
    failed BIGINT NOT NULL
);
DELETE FROM jobqueue_schema;
INSERT INTO jobqueue_schema VALUES (1);

-- name: migration_2
-- When a lease was claimed (lesson 11's metrics: the oldest lease).
ALTER TABLE jobqueue_jobs ADD COLUMN IF NOT EXISTS leased_at DOUBLE;
UPDATE jobqueue_schema SET version = 2;

-- name: migration_3
-- Priorities and deadlines (lesson 13): old jobs get priority 0 and no deadline.
ALTER TABLE jobqueue_jobs ADD COLUMN IF NOT EXISTS priority INTEGER DEFAULT 0;
ALTER TABLE jobqueue_jobs ADD COLUMN IF NOT EXISTS expires_at DOUBLE;
ALTER TABLE jobqueue_jobs ADD COLUMN IF NOT EXISTS expires_after_s DOUBLE;
ALTER TABLE jobqueue_dead ADD COLUMN IF NOT EXISTS priority INTEGER DEFAULT 0;
ALTER TABLE jobqueue_dead ADD COLUMN IF NOT EXISTS expires_at DOUBLE;
ALTER TABLE jobqueue_dead ADD COLUMN IF NOT EXISTS expires_after_s DOUBLE;
UPDATE jobqueue_schema SET version = 3;

-- name: migration_4
-- A priority is never NULL (DuckDB adds no NOT NULL with a column, so migration 3 could not
-- say so). A NULL stored by hand since becomes 0, the default.
UPDATE jobqueue_jobs SET priority = 0 WHERE priority IS NULL;
UPDATE jobqueue_dead SET priority = 0 WHERE priority IS NULL;
ALTER TABLE jobqueue_jobs ALTER COLUMN priority SET NOT NULL;
ALTER TABLE jobqueue_dead ALTER COLUMN priority SET NOT NULL;
UPDATE jobqueue_schema SET version = 4;

-- name: migration_5
-- Fencing tokens (lesson 06): each claim stores the next number of jobqueue_fencing in the
-- job's row, and the row keeps it through a release, a retry, its death and a replay. The
-- sequence is stored in the file with the claims that use it (a claim commits before it
-- returns), so a reopened file goes on from the last number it handed out. Jobs claimed
-- before have token 0, below every number to come.
CREATE SEQUENCE IF NOT EXISTS jobqueue_fencing;
ALTER TABLE jobqueue_jobs ADD COLUMN IF NOT EXISTS fencing_token BIGINT DEFAULT 0;
ALTER TABLE jobqueue_dead ADD COLUMN IF NOT EXISTS fencing_token BIGINT DEFAULT 0;
ALTER TABLE jobqueue_jobs ALTER COLUMN fencing_token SET NOT NULL;
ALTER TABLE jobqueue_dead ALTER COLUMN fencing_token SET NOT NULL;
UPDATE jobqueue_schema SET version = 5;

-- name: migration_6
-- Age since enqueue (lesson 13): each job, and each dead letter, stores when it was
-- enqueued. Jobs enqueued before have NULL, and the metrics count them from their run_at.
-- Retention: acked jobs kept for retain_s seconds, a job row with its outcome and the time
-- it finished.
ALTER TABLE jobqueue_jobs ADD COLUMN IF NOT EXISTS enqueued_at DOUBLE;
ALTER TABLE jobqueue_dead ADD COLUMN IF NOT EXISTS enqueued_at DOUBLE;
CREATE TABLE IF NOT EXISTS jobqueue_finished (
    id VARCHAR NOT NULL,
    type VARCHAR NOT NULL,
    payload VARCHAR NOT NULL,
    attempts INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL,
    base_s DOUBLE NOT NULL,
    cap_s DOUBLE NOT NULL,
    run_at DOUBLE NOT NULL,
    leased_until DOUBLE,
    leased_at DOUBLE,
    last_error VARCHAR,
    priority INTEGER NOT NULL,
    expires_at DOUBLE,
    expires_after_s DOUBLE,
    fencing_token BIGINT NOT NULL,
    enqueued_at DOUBLE,
    outcome VARCHAR NOT NULL,
    finished_at DOUBLE NOT NULL
);
UPDATE jobqueue_schema SET version = 6;

-- name: migration_7
-- Snoozes (jobqueue.errors.Snooze): how many times each live job was given back by a
-- snooze, which jobqueue.backends.rules.MAX_SNOOZES bounds; a replayed job starts at 0.
ALTER TABLE jobqueue_jobs ADD COLUMN IF NOT EXISTS snoozes INTEGER DEFAULT 0;
UPDATE jobqueue_jobs SET snoozes = 0 WHERE snoozes IS NULL;
ALTER TABLE jobqueue_jobs ALTER COLUMN snoozes SET NOT NULL;
UPDATE jobqueue_schema SET version = 7;

-- name: migration_8
-- Cancelling (queue.cancel): a leased job marked cancelled, which its ack or fail, or the
-- claim that finds its lease ran out, finishes as 'cancelled' in jobqueue_finished.
ALTER TABLE jobqueue_jobs ADD COLUMN IF NOT EXISTS cancelled BOOLEAN DEFAULT false;
UPDATE jobqueue_jobs SET cancelled = false WHERE cancelled IS NULL;
ALTER TABLE jobqueue_jobs ALTER COLUMN cancelled SET NOT NULL;
UPDATE jobqueue_schema SET version = 8;
-- name: migration_9
-- Unique windows (enqueue's unique_for_s): each job stores its window (NULL: none), and
-- jobqueue_held the ids of jobs enqueued with one, with their type and payload (what a
-- repeat's enqueue returns once the job is gone). held_until is 'infinity' while the job
-- lives or is dead, then its finish + unique_for_s (jobqueue.backends.rules.held_until);
-- pruned with the finished jobs once past.
ALTER TABLE jobqueue_jobs ADD COLUMN IF NOT EXISTS unique_for_s DOUBLE;
ALTER TABLE jobqueue_dead ADD COLUMN IF NOT EXISTS unique_for_s DOUBLE;
ALTER TABLE jobqueue_finished ADD COLUMN IF NOT EXISTS unique_for_s DOUBLE;
CREATE TABLE IF NOT EXISTS jobqueue_held (
    id VARCHAR PRIMARY KEY,
    type VARCHAR NOT NULL,
    payload VARCHAR NOT NULL,
    unique_for_s DOUBLE NOT NULL,
    held_until DOUBLE NOT NULL
);
UPDATE jobqueue_schema SET version = 9;

-- name: migration_10
-- Named queues (issue 24): each job, dead letter and kept finished job names the queue it
-- waits in; jobs enqueued before are in the queue 'default'.
ALTER TABLE jobqueue_jobs ADD COLUMN IF NOT EXISTS queue VARCHAR DEFAULT 'default';
ALTER TABLE jobqueue_dead ADD COLUMN IF NOT EXISTS queue VARCHAR DEFAULT 'default';
ALTER TABLE jobqueue_finished ADD COLUMN IF NOT EXISTS queue VARCHAR DEFAULT 'default';
UPDATE jobqueue_jobs SET queue = 'default' WHERE queue IS NULL;
UPDATE jobqueue_dead SET queue = 'default' WHERE queue IS NULL;
UPDATE jobqueue_finished SET queue = 'default' WHERE queue IS NULL;
ALTER TABLE jobqueue_jobs ALTER COLUMN queue SET NOT NULL;
ALTER TABLE jobqueue_dead ALTER COLUMN queue SET NOT NULL;
ALTER TABLE jobqueue_finished ALTER COLUMN queue SET NOT NULL;
UPDATE jobqueue_schema SET version = 10;

-- name: migration_11
-- Done and failed per job type and named queue (issue 24): jobqueue_outcomes counts each
-- second's outcomes per (type, queue). DuckDB cannot change a primary key, so the table is
-- made again (in the opening's transaction: all or nothing), its rows kept under type ''
-- and queue '' (not known then): they count in the totals and in no type's or queue's row.
CREATE TABLE jobqueue_outcomes_by_key (
    second BIGINT NOT NULL,
    type VARCHAR NOT NULL,
    queue VARCHAR NOT NULL,
    done BIGINT NOT NULL,
    failed BIGINT NOT NULL,
    PRIMARY KEY (second, type, queue)
);
INSERT INTO jobqueue_outcomes_by_key SELECT second, '', '', done, failed FROM jobqueue_outcomes;
DROP TABLE jobqueue_outcomes;
ALTER TABLE jobqueue_outcomes_by_key RENAME TO jobqueue_outcomes;
UPDATE jobqueue_schema SET version = 11;

-- name: highest_given_id
SELECT max(CAST(id[5:] AS BIGINT)) FROM (SELECT id FROM jobqueue_jobs UNION ALL SELECT id FROM jobqueue_dead)
WHERE regexp_full_match(id, 'job-[1-9][0-9]{0,17}');

-- name: priorities
SELECT DISTINCT priority FROM jobqueue_jobs;

-- name: next_job_id
SELECT coalesce(last_value + 1, start_value) FROM duckdb_sequences()
WHERE sequence_name = 'jobqueue_job_id' AND database_name = current_database()
AND schema_name = current_schema();

-- name: restart_job_ids
-- DDL takes no parameters: the caller appends the new start, an int.
CREATE OR REPLACE SEQUENCE jobqueue_job_id START WITH

-- name: enqueue
INSERT INTO jobqueue_jobs ({new_columns}) SELECT unnest($ids), $type, unnest($payloads), {new_values};

-- name: enqueue_fresh
INSERT INTO jobqueue_jobs ({new_columns}) SELECT 'job-' || nextval('jobqueue_job_id'), $type,
unnest($payloads), {new_values} RETURNING id, payload, serial;

-- name: enqueue_one
-- `enqueue_fresh` of one job, its payload as it is rather than in a list to unnest
-- (measured: a one-job enqueue about 0.1 ms faster, of about 1.9 ms).
INSERT INTO jobqueue_jobs ({new_columns}) VALUES ('job-' || nextval('jobqueue_job_id'), $type,
$payload, {new_values}) RETURNING id, payload, serial;

-- name: holds_any
SELECT count(*) > 0 FROM jobqueue_held;

-- name: held
-- The ids a unique window holds now: their job finished (or lives, held_until infinite).
SELECT id, type, payload FROM jobqueue_held WHERE id IN (SELECT unnest($ids)) AND held_until > $now;

-- name: hold
-- New jobs enqueued with a unique window; a row of an ended window goes first (`unhold`).
INSERT INTO jobqueue_held SELECT unnest($ids), $type, unnest($payloads), $unique_for_s, 'infinity';

-- name: unhold
DELETE FROM jobqueue_held WHERE id IN (SELECT unnest($ids));

-- name: hold_finished
-- Every way a job enqueued with a window finishes runs this in its transaction: the window
-- starts at $now.
UPDATE jobqueue_held SET held_until = $now + unique_for_s
WHERE id IN (SELECT unnest($ids)) AND held_until = 'infinity';

-- name: prune_held
DELETE FROM jobqueue_held WHERE id IN (
    SELECT id FROM jobqueue_held WHERE held_until < $before ORDER BY held_until LIMIT $limit
);

-- name: find
SELECT {job_columns} FROM jobqueue_jobs WHERE id IN (SELECT unnest($ids))
UNION ALL SELECT {dead_job_columns} FROM jobqueue_dead WHERE id IN (SELECT unnest($ids));

-- name: due
-- While the live jobs have one priority: lets DuckDB's top-N skip blocks of later rows.
-- The third column: the job must not run (spent, expired, or cancelled while leased).
-- `/* types */` becomes a claim's filter, in statements of their own (duckdb._due_statement):
-- the job types a worker has handlers for ($types, a list) and the named queues to claim
-- from ($queues, a list). One statement for every claim, each filter written as
-- `($types IS NULL OR list_contains($types, type))`, cost a claim of 100 with no filter
-- about 0.14 ms of its 1.2 ms in this statement (measured at 1k to 100k jobs waiting).
SELECT rowid, id, attempts >= max_attempts OR coalesce(expires_at < $now, false) OR cancelled
FROM jobqueue_jobs WHERE visible_at <= $now /* types */
ORDER BY visible_at, serial LIMIT $limit;

-- name: due_by_priority
SELECT rowid, id, attempts >= max_attempts OR coalesce(expires_at < $now, false) OR cancelled
FROM jobqueue_jobs WHERE visible_at <= $now /* types */
ORDER BY priority DESC, visible_at, serial LIMIT $limit;

-- name: claim
UPDATE jobqueue_jobs SET attempts = attempts + 1, leased_until = $until, leased_at = $now, visible_at = $until,
lease_token = 'lease-' || nextval('jobqueue_lease') || '-' || $tag, serial = nextval('jobqueue_serial'),
fencing_token = nextval('jobqueue_fencing')
WHERE rowid IN (SELECT unnest($rowids))
AND visible_at <= $now AND attempts < max_attempts AND coalesce(expires_at >= $now, true) AND NOT cancelled;

-- name: claimed
SELECT {job_columns}, lease_token FROM jobqueue_jobs WHERE rowid IN (SELECT unnest($rowids))
AND leased_until = $until;

-- name: ack
-- A job cancelled while leased is left for `keep_cancelled`: its token comes back unacked.
DELETE FROM jobqueue_jobs WHERE lease_token IN (SELECT unnest($tokens)) AND NOT cancelled RETURNING lease_token;

-- name: keep_acked
-- Before `ack`, in its transaction, for a queue that keeps finished jobs (retain_s > 0).
INSERT INTO jobqueue_finished ({job_columns}, outcome, finished_at)
SELECT {job_columns}, 'done', $now FROM jobqueue_jobs WHERE lease_token IN (SELECT unnest($tokens))
AND NOT cancelled;

-- name: keep_cancelled
-- The jobs held under $tokens and cancelled while leased, finished as cancelled at $now
-- ($error: the failed attempt's, or NULL after an ack); `delete_cancelled` follows, in the
-- same transaction.
INSERT INTO jobqueue_finished ({job_columns}, outcome, finished_at)
SELECT {job_columns_with_error}, 'cancelled', $now FROM jobqueue_jobs
WHERE lease_token IN (SELECT unnest($tokens)) AND cancelled;

-- name: delete_cancelled
DELETE FROM jobqueue_jobs WHERE lease_token IN (SELECT unnest($tokens)) AND cancelled RETURNING lease_token;

-- name: cancel_lock
-- The live job queue.cancel looks at: whether a lease holds it (its holder may still ack).
SELECT lease_token IS NOT NULL FROM jobqueue_jobs WHERE id = $id;

-- name: marked
SELECT id FROM jobqueue_jobs WHERE cancelled;

-- name: mark_cancelled
UPDATE jobqueue_jobs SET cancelled = true WHERE id = $id;

-- name: keep_cancelled_waiting
INSERT INTO jobqueue_finished ({job_columns}, outcome, finished_at)
SELECT {job_columns}, 'cancelled', $now FROM jobqueue_jobs WHERE id = $id;

-- name: ended
-- What became of a job no longer live: dead, or kept finished (the latest, if kept twice).
SELECT state FROM (
    SELECT 'dead' AS state, 1 AS rank, 0.0 AS ended_at FROM jobqueue_dead WHERE id = $id
    UNION ALL SELECT outcome, 2, finished_at FROM jobqueue_finished WHERE id = $id
) ORDER BY rank, ended_at DESC LIMIT 1;

-- name: prune_finished
-- Cancelled jobs are kept until $cancelled_before (jobqueue.backends.rules.is_pruned).
DELETE FROM jobqueue_finished WHERE rowid IN (
    SELECT rowid FROM jobqueue_finished
    WHERE finished_at < CASE WHEN outcome = 'cancelled' THEN $cancelled_before ELSE $before END
    ORDER BY finished_at LIMIT $limit
);

-- name: hold_pruned_dead
-- Before `prune_dead`, in a file that may hold ids under a unique window: the windows of the
-- dead letters it will delete start from their deaths, as a discard's do.
UPDATE jobqueue_held SET held_until = dead.died_at + jobqueue_held.unique_for_s
FROM (SELECT id, died_at FROM jobqueue_dead WHERE died_at < $before ORDER BY died_at, id LIMIT $limit) AS dead
WHERE jobqueue_held.id = dead.id AND jobqueue_held.held_until = 'infinity';

-- name: prune_dead
-- At most $limit dead letters that died before $before (jobqueue.backends.rules.is_dead_pruned),
-- oldest death first.
DELETE FROM jobqueue_dead WHERE id IN (
    SELECT id FROM jobqueue_dead WHERE died_at < $before ORDER BY died_at, id LIMIT $limit
);

-- name: finished
SELECT {job_columns}, outcome, finished_at FROM jobqueue_finished ORDER BY finished_at DESC LIMIT $limit;

-- name: holder
SELECT {job_columns}, lease_token, cancelled FROM jobqueue_jobs WHERE id = $id;

-- name: retry
UPDATE jobqueue_jobs SET run_at = $run_at, visible_at = $run_at, leased_until = NULL, leased_at = NULL,
lease_token = NULL, last_error = $error, serial = nextval('jobqueue_serial') WHERE id = $id;

-- name: bury
INSERT INTO jobqueue_dead ({dead_stored}, died_at)
SELECT {dead_stored_with_error}, $now FROM jobqueue_jobs WHERE id = $id;

-- name: delete
DELETE FROM jobqueue_jobs WHERE id = $id;

-- name: bury_spent
-- The due jobs a claim must not run: their final lease ran out, or their deadline passed.
-- Those cancelled while leased go to jobqueue_finished instead (`keep_cancelled_spent`).
INSERT INTO jobqueue_dead ({dead_stored}, died_at)
SELECT {dead_stored_spent}, $now FROM jobqueue_jobs WHERE id IN (SELECT unnest($ids)) AND NOT cancelled;

-- name: keep_cancelled_spent
INSERT INTO jobqueue_finished ({job_columns}, outcome, finished_at)
SELECT {job_columns}, 'cancelled', $now FROM jobqueue_jobs WHERE id IN (SELECT unnest($ids)) AND cancelled;

-- name: delete_spent
DELETE FROM jobqueue_jobs WHERE id IN (SELECT unnest($ids));

-- name: bury_unreadable
INSERT INTO jobqueue_dead ({dead_stored}, died_at)
VALUES ($id, $type, $payload, $attempts, $max_attempts, $base_s, $cap_s, $run_at, $error, $priority,
$expires_at, $expires_after_s, $fencing_token, $enqueued_at, $unique_for_s, $queue, $now);

-- name: rewrite_dead
UPDATE jobqueue_dead SET type = $type, payload = $payload, attempts = $attempts, max_attempts = $max_attempts,
base_s = $base_s, cap_s = $cap_s, run_at = $run_at, last_error = $error, priority = $priority,
expires_at = $expires_at, expires_after_s = $expires_after_s, fencing_token = $fencing_token,
enqueued_at = $enqueued_at, unique_for_s = $unique_for_s, queue = $queue, died_at = $now WHERE id = $id;

-- name: extend
UPDATE jobqueue_jobs SET leased_until = $until, visible_at = greatest(run_at, $until),
serial = nextval('jobqueue_serial') WHERE id = $id AND lease_token = $token RETURNING {job_columns}, cancelled;

-- name: release
UPDATE jobqueue_jobs SET attempts = $attempts, run_at = $run_at, visible_at = $run_at, leased_until = NULL,
leased_at = NULL, lease_token = NULL, serial = nextval('jobqueue_serial') WHERE id = $id AND lease_token = $token
RETURNING {job_columns};

-- name: snooze
-- A release that counts, refused (no row) once the job has used its snoozes ($most).
UPDATE jobqueue_jobs SET attempts = $attempts, run_at = $run_at, visible_at = $run_at, leased_until = NULL,
leased_at = NULL, lease_token = NULL, serial = nextval('jobqueue_serial'), snoozes = snoozes + 1
WHERE id = $id AND lease_token = $token AND snoozes < $most
RETURNING {job_columns};

-- name: dead_letter
-- The dead letter a replay starts from, taken out; `replay` puts back the job it becomes,
-- in the same transaction.
DELETE FROM jobqueue_dead WHERE id = $id RETURNING {dead_columns};

-- name: replay
INSERT INTO jobqueue_jobs (id, type, payload, max_attempts, base_s, cap_s, last_error, priority,
expires_after_s, attempts, run_at, visible_at, serial, expires_at, fencing_token, enqueued_at, unique_for_s, queue)
VALUES ($id, $type, $payload, $max_attempts, $base_s, $cap_s, $error, $priority, $expires_after_s, $attempts,
$run_at, $run_at, nextval('jobqueue_serial'), $expires_at, $fencing_token, $enqueued_at, $unique_for_s, $queue)
RETURNING {job_columns};

-- name: discard
DELETE FROM jobqueue_dead WHERE id = $id RETURNING {dead_columns};

-- name: get
SELECT {job_columns} FROM jobqueue_jobs WHERE id = $id;

-- name: jobs
SELECT {job_columns} FROM jobqueue_jobs ORDER BY visible_at, serial;

-- name: dead_letters
SELECT {dead_columns} FROM jobqueue_dead ORDER BY died_at, id;

-- name: next_visible_at
SELECT min(visible_at) FROM jobqueue_jobs;

-- name: count
SELECT count(*) FROM jobqueue_jobs;

-- name: metrics
SELECT count(*) FILTER (WHERE visible_at <= $now),
       count(*) FILTER (WHERE visible_at > $now AND coalesce(leased_until <= $now, true)),
       count(*) FILTER (WHERE leased_until > $now),
       coalesce(max($now - visible_at) FILTER (WHERE visible_at <= $now), 0.0),
       coalesce(max($now - leased_at) FILTER (WHERE leased_until > $now), 0.0),
       coalesce(max($now - coalesce(enqueued_at, run_at)) FILTER (WHERE coalesce(leased_until <= $now, true)), 0.0),
       (SELECT count(*) FROM jobqueue_dead),
       (SELECT coalesce(sum(done), 0) FROM jobqueue_outcomes WHERE second BETWEEN $since AND $now),
       (SELECT coalesce(sum(failed), 0) FROM jobqueue_outcomes WHERE second BETWEEN $since AND $now),
       (SELECT count(*) FROM jobqueue_finished WHERE outcome = 'cancelled')
FROM jobqueue_jobs;

-- name: count_outcomes
INSERT INTO jobqueue_outcomes (second, type, queue, done, failed)
SELECT unnest($seconds), unnest($types), unnest($queues), unnest($done), unnest($failed)
ON CONFLICT (second, type, queue) DO UPDATE SET done = jobqueue_outcomes.done + excluded.done,
failed = jobqueue_outcomes.failed + excluded.failed;

-- name: forget_outcomes
DELETE FROM jobqueue_outcomes WHERE second < $before;

-- The dashboard's reads (jobqueue.backends.contract.ShowsOverview). DuckDB stores columns and
-- reads them fast (the census of 100,000 jobs: about 3.5 ms), so every count here is exact.

-- name: census
-- The counts by state, queue and type, and beside the live jobs' counts what the census's two
-- ages need, in the same read of the jobs: each group's earliest visible_at (the waiting
-- jobs' is the oldest due job's) and its earliest enqueue time (the waiting and scheduled
-- jobs', those not under a lease, give the age since enqueue); the caller takes the earliest
-- of the groups that count. A job is due (visible_at <= $now) exactly when it is waiting: a
-- leased job's visible_at is at or after its lease's end. With 100,000 jobs waiting, the
-- census took 4.8-5.0 ms with the ages read in a statement of their own, 4.5-4.7 ms with
-- them beside the counts as a maximum with a FILTER each, and takes 3.5-3.6 ms with plain
-- minimums.
SELECT CASE WHEN leased_until > $now THEN 'leased' WHEN visible_at > $now THEN 'scheduled' ELSE 'waiting' END,
       queue, type, count(*), min(visible_at), min(coalesce(enqueued_at, run_at))
FROM jobqueue_jobs GROUP BY ALL
UNION ALL SELECT 'dead', queue, type, count(*), NULL, NULL FROM jobqueue_dead GROUP BY queue, type
UNION ALL SELECT 'cancelled', queue, type, count(*), NULL, NULL FROM jobqueue_finished
WHERE outcome = 'cancelled' GROUP BY queue, type;

-- name: leased_jobs
SELECT {job_columns} FROM jobqueue_jobs WHERE leased_until > $now ORDER BY leased_until, id LIMIT $limit;

-- name: newest_dead_letters
SELECT {dead_columns} FROM jobqueue_dead ORDER BY died_at DESC, id DESC LIMIT $limit;

-- name: outcome_sums
-- The dashboard's two sums of one span in one statement: by second (type and queue NULL),
-- then by type and queue (second NULL). Timed alone: on the few rows of
-- benchmarks/dashboard_refresh.py, 1.3 ms where the two statements it replaces took 0.9 +
-- 1.2 ms; on 600 seconds of 20 keys each, 1.9 ms against 3.2 ms. (Reading the rows as they
-- are and adding them up in Python took 0.5 ms on the first and 9.4 ms on the second.)
SELECT second, NULL, NULL, sum(done), sum(failed) FROM jobqueue_outcomes
WHERE second BETWEEN $since AND $until GROUP BY second
UNION ALL
SELECT NULL, type, queue, sum(done), sum(failed) FROM jobqueue_outcomes
WHERE second BETWEEN $since AND $until GROUP BY type, queue;
