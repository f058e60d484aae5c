//! The tables and server-side functions of one log, and their installation.
//!
//! A log lives in its own schema (named by the location's `log=`), so many
//! logs share a database without sharing a lock. The layout (drawn in
//! `docs/FORMATS.md`):
//!
//! * `head` — one row: the next seqnum, the first live seqnum, the layout
//!   version. Only a numbering round (and a trim) locks and updates it.
//! * `streams` — per primary tag, the next version. Only numbering rounds
//!   write it, one at a time, so stream rows are never contended.
//! * `entries` — one row per entry, keyed by seqnum, with a unique
//!   `(primary_tag, version)` index for version reads, a `(primary_tag,
//!   seqnum)` index for tag reads, and a partial unique index on the
//!   optional append id (exactly-once appends).
//! * `entry_tags` — one row per *secondary* tag of an entry, keyed by
//!   `(tag, seqnum)`, so a tag read covers entries where it is not primary.
//! * `staged` — append groups waiting for a round: one row per group, its
//!   entries as arrays.
//! * `outcomes` — what a round decided for each staged group (per entry:
//!   status, seqnum, version, ...), until its appender collects it.
//! * `kv` — the per-view KV: `(scope, key) -> value`.
//!
//! Functions (one call each, so no lock is held across a round trip):
//!
//! * `append(...)` — tries the numbering lock (a transaction-scoped
//!   advisory lock keyed by the OID of `head`) without waiting: when it
//!   gets it, it runs a round (`number`) over everything staged plus this
//!   group and answers the group's outcome; otherwise it stages the group
//!   and answers its id — unless one of its append ids is in a group
//!   still staged (a retry while the first try waits): then it stages
//!   nothing and says so, and the appender asks again after a round.
//! * `outcome_of(id)` — one staged group's outcome (the path of older
//!   builds, and of logs whose functions this role may not upgrade):
//!   collects it (deleting the row, with an asynchronous commit: the
//!   round's commit was the durable one) when a round has decided it; else runs a round when the
//!   lock is free; else answers "pending" at once. The appender then waits
//!   on the client for the running round's NOTIFY and asks again. (Waiting
//!   on the server — a shared request on the numbering lock — made every
//!   woken waiter hold that lock for a moment, and on a busy machine the
//!   next round's try-lock failed until each of them had been scheduled:
//!   tens of milliseconds between rounds.)
//! * `outcomes_of(ids)` — the outcomes of all the staged groups one
//!   handle waits for, in one call: collects the decided ones; when one is
//!   undecided and the lock is free, runs a round and collects again;
//!   answers "pending" for the rest. A handle calls it once
//!   per round heard, and only for groups the round may have settled
//!   (`collect.rs`): asking per group at every round's NOTIFY cost ~2.65
//!   calls per group, most of them answering "pending".
//! * `number(...)` — one round: lock `head`; take the oldest staged
//!   groups `round_ids()` allows (at most [`ROUND_MAX_GROUPS`] and
//!   [`ROUND_MAX_BYTES`] beyond the first; `DELETE ... RETURNING`, in
//!   staging order) and the caller's; resolve
//!   append ids already in the log or earlier in the round; check every
//!   conditional batch against the stream versions including earlier
//!   batches of the round (a batch whose condition fails is left out and
//!   reported; its neighbours are written); write the accepted entries
//!   with set-based inserts (a round without conditions or ids is numbered
//!   in one set-based pass); move the counters; record the staged groups'
//!   outcomes; `NOTIFY` the log's channel with the new next seqnum, and
//!   the settled channel with the highest staged id the round numbered,
//!   and `+` when it left staged groups behind (every round that decided
//!   anything, so staged appenders wake).
//! * `sweep(keep_ms)` — runs a round when groups are staged and the lock is
//!   free (groups whose process died), drops outcomes nobody collected
//!   within `keep_ms`, answers the head and the dead rows of `staged` and
//!   `outcomes`. Every tailer calls it about once per poll interval and
//!   vacuums those two tables when they hold many (`tailer.rs`).
//! * `trim(through)` — moves the trim point under the head lock.
//!
//! Portability: the tables, indexes and read queries are plain SQL that
//! CockroachDB, YugabyteDB and Aurora also accept; the functions are
//! PL/pgSQL (YugabyteDB and Aurora run it as is; CockroachDB has supported
//! PL/pgSQL only since 23.2 and may need changes). Two PostgreSQL features
//! have no portable equivalent: advisory locks (only recent YugabyteDB
//! releases have them, CockroachDB has no working ones; there the
//! numbering lock would have to be a row lock on `head` taken with `FOR
//! UPDATE SKIP LOCKED`, and a waiter would wait on that row), and
//! LISTEN/NOTIFY, which CockroachDB lacks (its subscribers fall back to
//! polling).

use tokio_postgres::Client;

use super::errors::{self, Op};
use crate::error::{Error, Result};

/// The most staged groups one numbering round takes.
pub(super) const ROUND_MAX_GROUPS: i64 = 1024;

/// The most staged payload bytes one numbering round takes (besides its
/// first group, which it always takes): far below PostgreSQL's 1 GiB limit
/// on one value, and a round this size finishes well inside a statement
/// timeout of seconds.
pub(super) const ROUND_MAX_BYTES: i64 = 64 << 20;

/// The layout version this code writes and reads.
pub(super) const LAYOUT_VERSION: i32 = 1;

/// The NOTIFY channel of the log in `schema`.
pub(super) fn channel(schema: &str) -> String {
    format!("weft_{schema}")
}

/// The channel on which every numbering round of the log in `schema` says
/// which staged groups it settled: the highest staged id it numbered, or
/// nothing (an empty payload) when it numbered no staged group. (A second
/// channel, so a process of an older build, which reads the first one's
/// payload as a seqnum, never sees this one.)
pub(super) fn settled_channel(schema: &str) -> String {
    format!("weft_settled_{schema}")
}

/// The SQL expression of the log's numbering lock: a transaction-scoped
/// advisory lock keyed by "weft" and the OID of the log's `head` table, so
/// two logs never share it.
fn lock_key(schema: &str) -> String {
    format!(r#"(2003134068::bigint << 32) | ('"{schema}".head'::regclass::oid::bigint)"#)
}

/// The statements that create the log's tables in `schema` (idempotent).
fn tables(schema: &str) -> String {
    let s = schema;
    format!(
        r#"
CREATE SCHEMA IF NOT EXISTS "{s}";
CREATE TABLE IF NOT EXISTS "{s}".head (
    id integer PRIMARY KEY CHECK (id = 1),
    next_seqnum bigint NOT NULL,
    first_seqnum bigint NOT NULL,
    layout integer NOT NULL
) WITH (fillfactor = 10);
INSERT INTO "{s}".head (id, next_seqnum, first_seqnum, layout)
    VALUES (1, 0, 0, {LAYOUT_VERSION}) ON CONFLICT (id) DO NOTHING;
CREATE TABLE IF NOT EXISTS "{s}".streams (
    tag text PRIMARY KEY,
    next_version bigint NOT NULL
) WITH (fillfactor = 50);
CREATE TABLE IF NOT EXISTS "{s}".entries (
    seqnum bigint PRIMARY KEY,
    primary_tag text NOT NULL,
    version bigint NOT NULL,
    tags text[] NOT NULL,
    data bytea NOT NULL,
    ts bigint NOT NULL,
    append_id text
);
CREATE UNIQUE INDEX IF NOT EXISTS entries_version ON "{s}".entries (primary_tag, version);
CREATE INDEX IF NOT EXISTS entries_tag ON "{s}".entries (primary_tag, seqnum);
CREATE UNIQUE INDEX IF NOT EXISTS entries_append_id ON "{s}".entries (append_id)
    WHERE append_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS "{s}".entry_tags (
    tag text NOT NULL,
    seqnum bigint NOT NULL,
    PRIMARY KEY (tag, seqnum)
);
CREATE TABLE IF NOT EXISTS "{s}".staged (
    id bigserial PRIMARY KEY,
    primary_tags text[] NOT NULL,
    secondary text[] NOT NULL,
    data bytea[] NOT NULL,
    expected bigint[] NOT NULL,
    ids text[] NOT NULL,
    batch_len integer[] NOT NULL,
    ts bigint NOT NULL
) WITH (vacuum_truncate = false);
CREATE TABLE IF NOT EXISTS "{s}".outcomes (
    id bigint PRIMARY KEY,
    status smallint[] NOT NULL,
    seqnum bigint[] NOT NULL,
    version bigint[] NOT NULL,
    ts bigint[] NOT NULL,
    tag text[] NOT NULL,
    next bigint[] NOT NULL,
    numbered_ms bigint NOT NULL
) WITH (vacuum_truncate = false);
CREATE TABLE IF NOT EXISTS "{s}".kv (
    scope text NOT NULL,
    key text NOT NULL,
    value bytea NOT NULL,
    PRIMARY KEY (scope, key)
);
"#
    )
}

/// The log's functions (`CREATE OR REPLACE`: installing them again, on a
/// log created by an older build, upgrades them in place).
fn functions(schema: &str) -> String {
    let s = schema;
    let channel = channel(schema);
    let settled = settled_channel(schema);
    let lock_key = lock_key(schema);
    format!(
        r#"
-- Appends land in two steps. A group first tries to take the log's
-- numbering lock (a transaction-scoped advisory lock, never waited for
-- here). The taker numbers the group itself, together with every group
-- other processes staged meanwhile (number below), in this one
-- transaction. Everyone else stages the group (one row, committed at
-- once without waiting for its flush) and then learns its outcome from
-- outcome_of.
--
-- Arguments, per entry: primary tag, secondary tags joined by a newline
-- (tags hold no control characters) or NULL, payload, expected version
-- (-1 for: the stream exists, its next version is above 0) or NULL, append id or NULL; p_batch_len splits the entries into atomic
-- batches (an id appears at most once per batch). Returns one row per
-- entry, in order:
--   status 0 written (seqnum, version, ts)
--   status 1 its append id was already in the log (the original's seqnum,
--            version, ts, primary tag)
--   status 2 its condition failed (version = expected, next = the
--            stream's next version); its batch is not written
--   status 3 not written because another entry of its batch failed
-- or, when the group was staged, one row: status 4, seqnum = its id;
-- or, when an append id of the group is in a group still staged (a retry
-- while the first try waits), one row: status 7, seqnum = that group's
-- id. Nothing was staged: the caller asks again after the next round, so
-- a retried payload is never staged twice.
CREATE OR REPLACE FUNCTION "{s}".append(
    p_primary text[], p_secondary text[], p_data bytea[], p_expected bigint[],
    p_ids text[], p_batch_len integer[], p_ts bigint)
RETURNS TABLE (status smallint, seqnum bigint, version bigint, ts bigint, tag text, next bigint)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_id bigint;
BEGIN
    IF pg_try_advisory_xact_lock({lock_key}) THEN
        RETURN QUERY SELECT * FROM "{s}".number(p_primary, p_secondary, p_data,
            p_expected, p_ids, p_batch_len, p_ts);
        RETURN;
    END IF;
    -- The staged row needs no flush of its own: the round that numbers it
    -- commits durably, after it in the WAL, before anyone hears an
    -- outcome; a crash that loses it leaves the appender's outcome unknown
    -- (Indeterminate), as any failure after staging does. Waiting for this
    -- flush was most of a staged append's time (wait event WALWrite).
    PERFORM set_config('synchronous_commit', 'off', true);
    IF array_remove(p_ids, NULL) <> '{{}}' THEN
        SELECT g.id INTO v_id FROM "{s}".staged g WHERE g.ids && p_ids ORDER BY g.id LIMIT 1;
        IF FOUND THEN
            RETURN QUERY SELECT 7::smallint, v_id, NULL::bigint, NULL::bigint, NULL::text, NULL::bigint;
            RETURN;
        END IF;
    END IF;
    INSERT INTO "{s}".staged (primary_tags, secondary, data, expected, ids, batch_len, ts)
        VALUES (p_primary, p_secondary, p_data, p_expected, p_ids, p_batch_len, p_ts)
        RETURNING staged.id INTO v_id;
    RETURN QUERY SELECT 4::smallint, v_id, NULL::bigint, NULL::bigint, NULL::text, NULL::bigint;
END
$fn$;

-- The outcome of the staged group p_id, rows as append's, never waiting:
-- collects it when a round has decided it; otherwise runs a round itself
-- when the numbering lock is free. Status 6 (one row): a round is running
-- now; its commit notifies the log's channel, and the caller asks again
-- then (waiting on the client, so no server backend spins or queues on a
-- lock). Status 5 (one row): the group is neither staged nor numbered
-- within the outcome window: its outcome is unknown.
CREATE OR REPLACE FUNCTION "{s}".outcome_of(p_id bigint)
RETURNS TABLE (status smallint, seqnum bigint, version bigint, ts bigint, tag text, next bigint)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    o record;
BEGIN
    DELETE FROM "{s}".outcomes x WHERE x.id = p_id RETURNING x.* INTO o;
    IF FOUND THEN
        -- Only the outcome row went: nothing here needs a durable commit
        -- (the numbering transaction was).
        PERFORM set_config('synchronous_commit', 'off', true);
    ELSIF pg_try_advisory_xact_lock({lock_key}) THEN
        PERFORM 1 FROM "{s}".number(NULL, NULL, NULL, NULL, NULL, NULL, NULL);
        DELETE FROM "{s}".outcomes x WHERE x.id = p_id RETURNING x.* INTO o;
        IF NOT FOUND THEN
            -- Still staged: the bounded round left it for the next one.
            RETURN QUERY SELECT CASE WHEN EXISTS (SELECT 1 FROM "{s}".staged g WHERE g.id = p_id)
                                     THEN 6::smallint ELSE 5::smallint END,
                                p_id, NULL::bigint, NULL::bigint, NULL::text, NULL::bigint;
            RETURN;
        END IF;
    ELSE
        RETURN QUERY SELECT 6::smallint, p_id, NULL::bigint, NULL::bigint, NULL::text, NULL::bigint;
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM unnest(o.status, o.seqnum, o.version, o.ts, o.tag, o.next);
END
$fn$;

-- The outcomes of the staged groups p_ids (every group one process waits
-- for, in one call per round), never waiting: collects what rounds
-- decided; then, when a group is still undecided, runs a round itself if
-- the numbering lock is free, and collects again. (A call whose groups
-- were all decided starts no round: its appenders would wait for that
-- round too; the next append takes the lock instead.)
-- Rows: the group's id, then rows as append's, a decided group's entries
-- in order; an undecided group gets one row, status 6 (pending: a round
-- of another process holds the lock; its commit notifies) or 5 (unknown:
-- neither staged nor numbered within the outcome window).
CREATE OR REPLACE FUNCTION "{s}".outcomes_of(p_ids bigint[])
RETURNS TABLE (id bigint, status smallint, seqnum bigint, version bigint, ts bigint, tag text, next bigint)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    o record;
    v_left bigint[] := coalesce(p_ids, '{{}}');
    v_status smallint := 6;
BEGIN
    FOR o IN DELETE FROM "{s}".outcomes x WHERE x.id = ANY (v_left) RETURNING x.* LOOP
        v_left := array_remove(v_left, o.id);
        RETURN QUERY SELECT o.id, u.st, u.seq, u.ver, u.t, u.tg, u.nx FROM unnest(o.status, o.seqnum, o.version, o.ts, o.tag, o.next)
            WITH ORDINALITY AS u(st, seq, ver, t, tg, nx, ord) ORDER BY u.ord;
    END LOOP;
    IF v_left <> '{{}}' AND pg_try_advisory_xact_lock({lock_key}) THEN
        PERFORM 1 FROM "{s}".number(NULL, NULL, NULL, NULL, NULL, NULL, NULL);
        v_status := 5;
        FOR o IN DELETE FROM "{s}".outcomes x WHERE x.id = ANY (v_left) RETURNING x.* LOOP
            v_left := array_remove(v_left, o.id);
            RETURN QUERY SELECT o.id, u.st, u.seq, u.ver, u.t, u.tg, u.nx FROM unnest(o.status, o.seqnum, o.version, o.ts, o.tag, o.next)
                WITH ORDINALITY AS u(st, seq, ver, t, tg, nx, ord) ORDER BY u.ord;
        END LOOP;
    ELSE
        -- Only outcome rows went: the rounds' commits were the durable ones.
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
    -- A group the round left staged (rounds are bounded) is pending, not
    -- unknown: the round's notification says more are staged, and the
    -- waiters ask again.
    RETURN QUERY SELECT x, CASE WHEN v_status = 5 AND EXISTS (SELECT 1 FROM "{s}".staged g WHERE g.id = x)
                                THEN 6::smallint ELSE v_status END,
                        NULL::bigint, NULL::bigint, NULL::bigint, NULL::text, NULL::bigint
        FROM unnest(v_left) AS x;
END
$fn$;

-- The staged groups the next round takes: the oldest, at most
-- weft.round_max_groups of them (default {ROUND_MAX_GROUPS}) and no more payload
-- than weft.round_max_bytes (default {ROUND_MAX_BYTES}) besides the first group. A
-- round over every staged group had no bound: past statement_timeout, or
-- past PostgreSQL's 1 GiB array limit, every round failed and rolled back
-- while the backlog grew. pg_column_size reads the stored size without
-- fetching the payload. (The two settings are custom parameters a
-- connection may set, so a test can make rounds small.)
CREATE OR REPLACE FUNCTION "{s}".round_ids()
RETURNS SETOF bigint
LANGUAGE sql STABLE AS $fn$
    SELECT w.id FROM (
        SELECT x.id, sum(pg_column_size(x.data)) OVER (ORDER BY x.id)
                     - pg_column_size(x.data) AS before
          FROM (SELECT g.id, g.data FROM "{s}".staged g ORDER BY g.id
                 LIMIT coalesce(nullif(current_setting('weft.round_max_groups', true), '')::integer,
                                {ROUND_MAX_GROUPS})) x) w
     WHERE w.before < coalesce(nullif(current_setting('weft.round_max_bytes', true), '')::bigint,
                               {ROUND_MAX_BYTES})
     ORDER BY w.id
$fn$;

-- Numbers the oldest staged groups (round_ids) and then the caller's own group (NULL
-- arrays: none) in one round, under the numbering lock the caller holds.
-- Staged groups' outcomes go to the outcomes table; the own group's are
-- returned.
CREATE OR REPLACE FUNCTION "{s}".number(
    p_primary text[], p_secondary text[], p_data bytea[], p_expected bigint[],
    p_ids text[], p_batch_len integer[], p_ts bigint)
RETURNS TABLE (status smallint, seqnum bigint, version bigint, ts bigint, tag text, next bigint)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    g_id bigint[];
    g_len integer[];
    e_primary text[];
    e_secondary text[];
    e_data bytea[];
    e_expected bigint[];
    e_ids text[];
    e_ts bigint[];
    e_tix integer[];
    b_len integer[];
    n integer;
    n_staged integer;
    v_next bigint;
    v_start bigint;
    s_tags text[];
    s_next bigint[];
    s_start bigint[];
    saved bigint[];
    r_status smallint[];
    r_seq bigint[];
    r_ver bigint[];
    r_ts bigint[];
    r_tag text[];
    r_next bigint[];
    last_ts bigint;
    d_ids text[] := '{{}}';
    d_seq bigint[];
    d_ver bigint[];
    d_ts bigint[];
    d_tag text[];
    c_ids text[] := '{{}}';
    c_idx integer[] := '{{}}';
    b integer;
    i integer := 1;
    j integer;
    k integer;
    t integer;
    b_end integer;
    seq bigint;
    ok boolean;
BEGIN
    SELECT h.next_seqnum INTO v_next FROM "{s}".head h WHERE h.id = 1 FOR UPDATE;
    v_start := v_next;
    -- The round: the oldest groups staged and committed so far, as many
    -- as round_ids bounds, in staging order, then the caller's.
    WITH d AS MATERIALIZED (DELETE FROM "{s}".staged x
                             WHERE x.id = ANY (ARRAY(SELECT "{s}".round_ids()))
                             RETURNING x.*),
         f AS (SELECT d.id, d.ts, x.* FROM d,
                 unnest(d.primary_tags, d.secondary, d.data, d.expected, d.ids)
                 WITH ORDINALITY AS x(p, sec, dat, e, aid, o))
    SELECT (SELECT array_agg(d.id ORDER BY d.id) FROM d),
           (SELECT array_agg(cardinality(d.data) ORDER BY d.id) FROM d),
           (SELECT array_agg(bl ORDER BY d.id, bo) FROM d,
                   unnest(d.batch_len) WITH ORDINALITY AS y(bl, bo)),
           array_agg(f.p ORDER BY f.id, f.o), array_agg(f.sec ORDER BY f.id, f.o),
           array_agg(f.dat ORDER BY f.id, f.o), array_agg(f.e ORDER BY f.id, f.o),
           array_agg(f.aid ORDER BY f.id, f.o), array_agg(f.ts ORDER BY f.id, f.o)
      INTO g_id, g_len, b_len, e_primary, e_secondary, e_data, e_expected, e_ids, e_ts
      FROM f;
    n_staged := coalesce(cardinality(e_data), 0);
    IF p_data IS NOT NULL THEN
        e_primary := coalesce(e_primary, '{{}}') || p_primary;
        e_secondary := coalesce(e_secondary, '{{}}') || p_secondary;
        e_data := coalesce(e_data, '{{}}') || p_data;
        e_expected := coalesce(e_expected, '{{}}') || p_expected;
        e_ids := coalesce(e_ids, '{{}}') || p_ids;
        e_ts := coalesce(e_ts, '{{}}') || array_fill(p_ts, ARRAY[cardinality(p_data)]);
        b_len := coalesce(b_len, '{{}}') || p_batch_len;
    END IF;
    n := coalesce(cardinality(e_data), 0);
    IF n = 0 THEN
        RETURN;
    END IF;
    r_status := array_fill(0::smallint, ARRAY[n]);
    r_seq := array_fill(NULL::bigint, ARRAY[n]);
    r_ver := array_fill(NULL::bigint, ARRAY[n]);
    r_ts := e_ts;
    r_tag := array_fill(NULL::text, ARRAY[n]);
    r_next := array_fill(NULL::bigint, ARRAY[n]);
    -- The streams of the round, and each entry's index among them.
    SELECT coalesce(array_agg(d.t ORDER BY d.t), '{{}}'),
           coalesce(array_agg(coalesce(st.next_version, 0) ORDER BY d.t), '{{}}')
      INTO s_tags, s_next
      FROM (SELECT DISTINCT x AS t FROM unnest(e_primary) x) d
      LEFT JOIN "{s}".streams st ON st.tag = d.t;
    s_start := s_next;
    SELECT array_agg(k.ix ORDER BY u.o) INTO e_tix
      FROM unnest(e_primary) WITH ORDINALITY AS u(t, o)
      JOIN unnest(s_tags) WITH ORDINALITY AS k(t, ix) ON k.t = u.t;
    IF array_remove(e_expected, NULL) = '{{}}' AND array_remove(e_ids, NULL) = '{{}}' THEN
        -- Nothing to check: numbers in one pass, set-based.
        SELECT array_agg(v_next + u.o - 1 ORDER BY u.o),
               array_agg(s_next[u.ix] + u.rn - 1 ORDER BY u.o)
          INTO r_seq, r_ver
          FROM (SELECT z.ix, z.o, row_number() OVER (PARTITION BY z.ix ORDER BY z.o) AS rn
                  FROM unnest(e_tix) WITH ORDINALITY AS z(ix, o)) u;
        SELECT array_agg(s_next[k.ix] + coalesce(c.cnt, 0) ORDER BY k.ix) INTO s_next
          FROM generate_subscripts(s_tags, 1) AS k(ix)
          LEFT JOIN (SELECT z.ix, count(*) AS cnt FROM unnest(e_tix) AS z(ix) GROUP BY z.ix) c
            ON c.ix = k.ix;
        v_next := v_next + n;
    ELSE
        IF array_remove(e_ids, NULL) <> '{{}}' THEN
            SELECT coalesce(array_agg(e.append_id), '{{}}'), array_agg(e.seqnum),
                   array_agg(e.version), array_agg(e.ts), array_agg(e.primary_tag)
              INTO d_ids, d_seq, d_ver, d_ts, d_tag
              FROM "{s}".entries e WHERE e.append_id = ANY (e_ids);
        END IF;
        FOR b IN 1 .. coalesce(cardinality(b_len), 0) LOOP
            b_end := i + b_len[b] - 1;
            saved := s_next;
            seq := v_next;
            ok := true;
            FOR j IN i .. b_end LOOP
                IF e_ids[j] IS NOT NULL THEN
                    k := array_position(d_ids, e_ids[j]);
                    IF k IS NOT NULL THEN
                        r_status[j] := 1; r_seq[j] := d_seq[k]; r_ver[j] := d_ver[k];
                        r_ts[j] := d_ts[k]; r_tag[j] := d_tag[k];
                        CONTINUE;
                    END IF;
                    k := array_position(c_ids, e_ids[j]);
                    IF k IS NOT NULL THEN
                        k := c_idx[k];
                        r_status[j] := 1; r_seq[j] := r_seq[k]; r_ver[j] := r_ver[k];
                        r_ts[j] := r_ts[k]; r_tag[j] := e_primary[k];
                        CONTINUE;
                    END IF;
                END IF;
                t := e_tix[j];
                -- -1 means the stream exists (next version above 0), any
                -- other value is the exact next version.
                IF e_expected[j] IS NOT NULL
                        AND ((e_expected[j] = -1 AND s_next[t] = 0)
                          OR (e_expected[j] <> -1 AND e_expected[j] <> s_next[t])) THEN
                    ok := false;
                    r_status[j] := 2; r_ver[j] := e_expected[j]; r_next[j] := s_next[t];
                    EXIT;
                END IF;
                r_seq[j] := seq; r_ver[j] := s_next[t];
                s_next[t] := s_next[t] + 1;
                seq := seq + 1;
            END LOOP;
            IF ok THEN
                v_next := seq;
                FOR j IN i .. b_end LOOP
                    IF r_status[j] = 0 AND e_ids[j] IS NOT NULL THEN
                        c_ids := c_ids || e_ids[j];
                        c_idx := c_idx || j;
                    END IF;
                END LOOP;
            ELSE
                s_next := saved;
                FOR j IN i .. b_end LOOP
                    IF r_status[j] = 0 THEN
                        r_status[j] := 3; r_seq[j] := NULL; r_ver[j] := NULL;
                    END IF;
                END LOOP;
            END IF;
            i := b_end + 1;
        END LOOP;
    END IF;
    IF v_next > v_start THEN
        -- Timestamps are monotonic within the log: an entry written now
        -- is stamped no earlier than the newest entry (the appenders'
        -- clocks differ, and one may go back). Written entries are numbered
        -- in array order, so one pass in that order suffices.
        SELECT e.ts INTO last_ts FROM "{s}".entries e WHERE e.seqnum = v_start - 1;
        last_ts := coalesce(last_ts, 0);
        FOR j IN 1 .. n LOOP
            IF r_status[j] = 0 THEN
                r_ts[j] := greatest(r_ts[j], last_ts);
                last_ts := r_ts[j];
            END IF;
        END LOOP;
        INSERT INTO "{s}".entries (seqnum, primary_tag, version, tags, data, ts, append_id)
        SELECT u.seq, u.prim, u.ver,
               CASE WHEN u.sec IS NULL THEN ARRAY[u.prim]
                    ELSE array_prepend(u.prim, string_to_array(u.sec, E'\n')) END,
               u.data, u.ts, u.id
          FROM unnest(r_status, r_seq, e_primary, r_ver, e_secondary, e_data, r_ts, e_ids)
               AS u(st, seq, prim, ver, sec, data, ts, id)
         WHERE u.st = 0;
        IF array_remove(e_secondary, NULL) <> '{{}}' THEN
            INSERT INTO "{s}".entry_tags (tag, seqnum)
            SELECT x, u.seq
              FROM unnest(r_status, r_seq, e_secondary) AS u(st, seq, sec),
                   LATERAL unnest(string_to_array(u.sec, E'\n')) AS x
             WHERE u.st = 0 AND u.sec IS NOT NULL;
        END IF;
        INSERT INTO "{s}".streams AS st (tag, next_version)
        SELECT u.t, u.v FROM unnest(s_tags, s_next, s_start) AS u(t, v, v0)
         WHERE u.v <> u.v0
        ON CONFLICT (tag) DO UPDATE SET next_version = excluded.next_version;
        UPDATE "{s}".head SET next_seqnum = v_next WHERE id = 1;
    END IF;
    -- Every round that decided something tells the log's channel at its
    -- commit: subscribers read on, and appenders whose groups were staged
    -- collect their outcomes (or run the next round).
    PERFORM pg_notify('{channel}', v_next::text);
    -- The highest staged id this round settled (g_id is in id order): a
    -- waiting appender whose group's id is above it knows, without
    -- asking, that this round did not settle it.
    -- A trailing '+' says the round left staged groups behind (it is
    -- bounded): everybody waiting asks at once, so the next round starts.
    PERFORM pg_notify('{settled}', coalesce(g_id[cardinality(g_id)]::text, '')
        || CASE WHEN EXISTS (SELECT 1 FROM "{s}".staged) THEN '+' ELSE '' END);
    IF n_staged > 0 THEN
        INSERT INTO "{s}".outcomes (id, status, seqnum, version, ts, tag, next, numbered_ms)
        SELECT g.id, r_status[g.lo:g.hi], r_seq[g.lo:g.hi], r_ver[g.lo:g.hi],
               r_ts[g.lo:g.hi], r_tag[g.lo:g.hi], r_next[g.lo:g.hi],
               (extract(epoch FROM clock_timestamp()) * 1000)::bigint
          FROM (SELECT u.id, u.len, sum(u.len) OVER (ORDER BY u.o) - u.len + 1 AS lo,
                       sum(u.len) OVER (ORDER BY u.o) AS hi
                  FROM unnest(g_id, g_len) WITH ORDINALITY AS u(id, len, o)) g;
    END IF;
    RETURN QUERY
        SELECT u.st, u.seq, u.ver, u.ts, u.tag, u.nx
          FROM unnest(r_status[n_staged + 1:n], r_seq[n_staged + 1:n], r_ver[n_staged + 1:n],
                      r_ts[n_staged + 1:n], r_tag[n_staged + 1:n], r_next[n_staged + 1:n])
               WITH ORDINALITY AS u(st, seq, ver, ts, tag, nx, ord)
         ORDER BY u.ord;
END
$fn$;

-- Numbers what is staged (groups whose process died between staging and
-- numbering, or whose appender gave up) when the numbering lock is free,
-- and drops outcomes older than p_keep_ms that nobody collected. Returns
-- the head after that, and the dead rows the server counts in the two
-- work tables (the caller vacuums them when there are many: every group
-- staged leaves a dead row, and rounds scan the whole of staged). Called
-- by every handle's tailer about once per poll interval.
CREATE OR REPLACE FUNCTION "{s}".sweep(p_keep_ms bigint)
RETURNS TABLE (first_seqnum bigint, next_seqnum bigint, dead_rows bigint)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
BEGIN
    IF EXISTS (SELECT 1 FROM "{s}".staged) AND pg_try_advisory_xact_lock({lock_key}) THEN
        PERFORM 1 FROM "{s}".number(NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    ELSE
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
    DELETE FROM "{s}".outcomes x
     WHERE x.numbered_ms < (extract(epoch FROM clock_timestamp()) * 1000)::bigint - p_keep_ms;
    RETURN QUERY SELECT h.first_seqnum, h.next_seqnum,
                        pg_stat_get_dead_tuples('"{s}".staged'::regclass)
                        + pg_stat_get_dead_tuples('"{s}".outcomes'::regclass)
                   FROM "{s}".head h WHERE h.id = 1;
END
$fn$;

-- Moves the trim point to p_through + 1 under the head lock (a few
-- microseconds; the rows go later, outside the lock). Returns the head
-- after the call; nothing changes when p_through >= next_seqnum.
CREATE OR REPLACE FUNCTION "{s}".trim(p_through bigint)
RETURNS TABLE (first_seqnum bigint, next_seqnum bigint)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_first bigint;
    v_next bigint;
BEGIN
    SELECT h.first_seqnum, h.next_seqnum INTO v_first, v_next
      FROM "{s}".head h WHERE h.id = 1 FOR UPDATE;
    IF p_through < v_next AND p_through + 1 > v_first THEN
        v_first := p_through + 1;
        UPDATE "{s}".head SET first_seqnum = v_first WHERE id = 1;
    END IF;
    RETURN QUERY SELECT v_first, v_next;
END
$fn$;
"#
    )
}

/// What the log's installed functions offer this build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Installed {
    /// `outcomes_of` and the settled channel are there: staged groups'
    /// outcomes are collected per handle, one call per round. False for a
    /// log created by an older build whose functions this role may not
    /// replace: then each staged group asks `outcome_of` itself.
    pub(super) bulk_outcomes: bool,
}

/// Creates the log in `schema` if it is absent, upgrades the functions of
/// a log created by an older build, and checks its layout.
///
/// Concurrent installers (several processes opening a new log at once)
/// serialise on a transaction-scoped advisory lock, so `CREATE ... IF NOT
/// EXISTS` never races itself, nor two `CREATE OR REPLACE` of one
/// function.
///
/// Upgrading in place is safe with older processes still running on the
/// log: every function keeps its signature and answers; the new `number`
/// only sends one more notification, on a channel older builds do not
/// listen to; a backend in the middle of a call finishes it with the old
/// body. When the role may not replace the functions (it does not own
/// them), the log keeps them and this handle uses the older path.
///
/// Errors: `NotFound` when the log is absent and `create` is false;
/// `Corrupt` when the schema holds a log of another layout
/// version; `PermissionDenied` when the role may not create it; the
/// connection kinds of [`errors::classify`].
pub(super) async fn install(client: &mut Client, schema: &str, create: bool) -> Result<Installed> {
    let op = Op::Read;
    let mut tx = client
        .transaction()
        .await
        .map_err(|e| errors::classify(e, op, "begin the schema install"))?;
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtext($1))",
        &[&format!("weft schema {schema}")],
    )
    .await
    .map_err(|e| errors::classify(e, op, "lock the schema install"))?;
    let present = tx
        .query_one(
            "SELECT count(*) FILTER (WHERE p.proname = 'append'), \
                    count(*) FILTER (WHERE p.proname = 'outcomes_of'), \
                    count(*) FILTER (WHERE p.proname = 'round_ids') \
             FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n \
             ON n.oid = p.pronamespace WHERE n.nspname = $1",
            &[&schema],
        )
        .await
        .map_err(|e| errors::classify(e, op, "look for the log's schema"))?;
    let (existing, bulk, bounded) = (
        present.get::<_, i64>(0) > 0,
        present.get::<_, i64>(1) > 0,
        present.get::<_, i64>(2) > 0,
    );
    if !existing && !create {
        return Err(Error::new(
            crate::ErrorKind::NotFound,
            format!("no log {schema:?} in this database"),
        ));
    }
    let mut installed = Installed {
        bulk_outcomes: true,
    };
    if !existing {
        // The schema may exist already and hold somebody else's tables:
        // creating the log's `IF NOT EXISTS` would then keep theirs and
        // fail later on a column they lack.
        let held: i64 = tx
            .query_one(
                "SELECT count(*) FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n \
                 ON n.oid = c.relnamespace WHERE n.nspname = $1",
                &[&schema],
            )
            .await
            .map_err(|e| errors::classify(e, op, "look into the log's schema"))?
            .get(0);
        if held > 0 {
            return Err(Error::invalid_input(format!(
                "the schema {schema:?} already holds {held} tables or other relations that are \
                 not a weft log: name another log (log=...)"
            )));
        }
    }
    if !existing {
        tx.batch_execute(&format!("{}{}", tables(schema), functions(schema)))
            .await
            .map_err(|e| errors::classify(e, op, format!("create the log schema {schema:?}")))?;
    }
    let layout: i32 = tx
        .query_one(
            &format!(r#"SELECT layout FROM "{schema}".head WHERE id = 1"#),
            &[],
        )
        .await
        .map_err(|e| errors::classify(e, op, "read the log's head"))?
        .get(0);
    if layout != LAYOUT_VERSION {
        return Err(Error::corrupt(format!(
            "the log in schema {schema:?} has layout version {layout}; this weft reads {LAYOUT_VERSION}"
        )));
    }
    if existing && !(bulk && bounded) {
        // A log of an older build: upgrade its functions, in a savepoint
        // so a refusal leaves the install transaction usable.
        let upgrade = tx
            .transaction()
            .await
            .map_err(|e| errors::classify(e, op, "begin the functions' upgrade"))?;
        match upgrade.batch_execute(&functions(schema)).await {
            Ok(()) => upgrade
                .commit()
                .await
                .map_err(|e| errors::classify(e, op, "upgrade the log's functions"))?,
            Err(e) => {
                tracing::debug!(error = %e, schema, "the log's functions stay as an older build installed them");
                upgrade
                    .rollback()
                    .await
                    .map_err(|e| errors::classify(e, op, "roll back the functions' upgrade"))?;
                installed.bulk_outcomes = bulk;
            }
        }
    }
    tx.commit()
        .await
        .map_err(|e| errors::classify(e, op, "commit the schema install"))?;
    Ok(installed)
}
