//! The tables and server-side functions of one log, and their installation.
//!
//! A log lives in its own schema (named by the location's `log=`), so many
//! logs share a database without sharing a lock. The layout (drawn in
//! `docs/FORMATS.md`):
//!
//! * `head` — one row: the next seqnum, the first live seqnum, the layout
//!   version. Every append locks this row first and updates it; the row
//!   lock is held until COMMIT, which is what makes seqnums dense and
//!   assigned in commit order (no reader ever sees N+1 before N).
//! * `streams` — per primary tag, the next version. Only the holder of the
//!   head lock writes it, so stream rows are never contended otherwise.
//! * `entries` — one row per entry, keyed by seqnum, with a unique
//!   `(primary_tag, version)` index for version reads, a `(primary_tag,
//!   seqnum)` index for tag reads, and a partial unique index on the
//!   optional append id (exactly-once appends).
//! * `entry_tags` — one row per *secondary* tag of an entry, keyed by
//!   `(tag, seqnum)`, so a tag read covers entries where it is not primary.
//! * `kv` — the per-view KV: `(scope, key) -> value`.
//!
//! `append(...)` runs an append group in one round trip: lock the head,
//! resolve append ids already in the log, check every conditional batch
//! against the stream versions (including earlier batches of the same
//! group), write the accepted batches with two set-based inserts, move the
//! counters, `NOTIFY` the log's channel. A batch whose condition fails is
//! left out and reported; its neighbours in the group are written. The
//! lock is held for that one statement plus its COMMIT.
//!
//! Portability: the tables, indexes and read queries are plain SQL that
//! CockroachDB, YugabyteDB and Aurora also accept; the append and trim
//! functions are PL/pgSQL (YugabyteDB and Aurora run it as is; CockroachDB
//! has supported PL/pgSQL only since 23.2 and may need changes), and the
//! subscription wake-up uses LISTEN/NOTIFY, which CockroachDB lacks (its
//! subscribers fall back to polling).

use tokio_postgres::Client;

use super::errors::{self, Op};
use crate::error::{Error, Result};

/// The layout version this code writes and reads.
pub(super) const LAYOUT_VERSION: i32 = 1;

/// The NOTIFY channel of the log in `schema`.
pub(super) fn channel(schema: &str) -> String {
    format!("weft_{schema}")
}

/// The statements that create the log in `schema` (idempotent).
fn ddl(schema: &str) -> String {
    let s = schema;
    let channel = channel(schema);
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
CREATE TABLE IF NOT EXISTS "{s}".kv (
    scope text NOT NULL,
    key text NOT NULL,
    value bytea NOT NULL,
    PRIMARY KEY (scope, key)
);

-- One append group. Per entry: primary tag, secondary tags joined by a
-- newline (tags hold no control characters) or NULL, payload, expected
-- version or NULL, append id or NULL; p_batch_len splits the entries into
-- atomic batches (an id appears at most once per batch). Returns one row per entry, in order:
--   status 0 written (seqnum, version, ts)
--   status 1 its append id was already in the log (the original's seqnum,
--            version, ts, primary tag)
--   status 2 its condition failed (version = expected, next = the
--            stream's next version); its batch is not written
--   status 3 not written because another entry of its batch failed
CREATE OR REPLACE FUNCTION "{s}".append(
    p_primary text[], p_secondary text[], p_data bytea[], p_expected bigint[],
    p_ids text[], p_batch_len integer[], p_ts bigint)
RETURNS TABLE (status smallint, seqnum bigint, version bigint, ts bigint, tag text, next bigint)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    n integer := coalesce(array_length(p_data, 1), 0);
    v_next bigint;
    v_start bigint;
    s_tags text[];
    s_next bigint[];
    s_start bigint[];
    saved bigint[];
    r_status smallint[] := array_fill(0::smallint, ARRAY[n]);
    r_seq bigint[] := array_fill(NULL::bigint, ARRAY[n]);
    r_ver bigint[] := array_fill(NULL::bigint, ARRAY[n]);
    r_ts bigint[] := array_fill(p_ts, ARRAY[n]);
    r_tag text[] := array_fill(NULL::text, ARRAY[n]);
    r_next bigint[] := array_fill(NULL::bigint, ARRAY[n]);
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
    any_secondary boolean := false;
BEGIN
    -- The serialising lock: held until COMMIT.
    SELECT h.next_seqnum INTO v_next FROM "{s}".head h WHERE h.id = 1 FOR UPDATE;
    v_start := v_next;
    IF array_length(array_remove(p_ids, NULL), 1) IS NOT NULL THEN
        SELECT coalesce(array_agg(e.append_id), '{{}}'), array_agg(e.seqnum),
               array_agg(e.version), array_agg(e.ts), array_agg(e.primary_tag)
          INTO d_ids, d_seq, d_ver, d_ts, d_tag
          FROM "{s}".entries e WHERE e.append_id = ANY (p_ids);
    END IF;
    SELECT coalesce(array_agg(d.t ORDER BY d.t), '{{}}'),
           coalesce(array_agg(coalesce(st.next_version, 0) ORDER BY d.t), '{{}}')
      INTO s_tags, s_next
      FROM (SELECT DISTINCT x AS t FROM unnest(p_primary) x) d
      LEFT JOIN "{s}".streams st ON st.tag = d.t;
    s_start := s_next;
    FOR b IN 1 .. coalesce(array_length(p_batch_len, 1), 0) LOOP
        b_end := i + p_batch_len[b] - 1;
        saved := s_next;
        seq := v_next;
        ok := true;
        FOR j IN i .. b_end LOOP
            IF p_ids[j] IS NOT NULL THEN
                k := array_position(d_ids, p_ids[j]);
                IF k IS NOT NULL THEN
                    r_status[j] := 1; r_seq[j] := d_seq[k]; r_ver[j] := d_ver[k];
                    r_ts[j] := d_ts[k]; r_tag[j] := d_tag[k];
                    CONTINUE;
                END IF;
                k := array_position(c_ids, p_ids[j]);
                IF k IS NOT NULL THEN
                    k := c_idx[k];
                    r_status[j] := 1; r_seq[j] := r_seq[k]; r_ver[j] := r_ver[k];
                    r_tag[j] := p_primary[k];
                    CONTINUE;
                END IF;
            END IF;
            t := array_position(s_tags, p_primary[j]);
            IF p_expected[j] IS NOT NULL AND p_expected[j] <> s_next[t] THEN
                ok := false;
                r_status[j] := 2; r_ver[j] := p_expected[j]; r_next[j] := s_next[t];
                EXIT;
            END IF;
            r_seq[j] := seq; r_ver[j] := s_next[t];
            s_next[t] := s_next[t] + 1;
            seq := seq + 1;
        END LOOP;
        IF ok THEN
            v_next := seq;
            FOR j IN i .. b_end LOOP
                IF r_status[j] = 0 THEN
                    IF p_secondary[j] IS NOT NULL THEN any_secondary := true; END IF;
                    IF p_ids[j] IS NOT NULL THEN
                        c_ids := c_ids || p_ids[j];
                        c_idx := c_idx || j;
                    END IF;
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
    IF v_next > v_start THEN
        INSERT INTO "{s}".entries (seqnum, primary_tag, version, tags, data, ts, append_id)
        SELECT u.seq, u.prim, u.ver,
               CASE WHEN u.sec IS NULL THEN ARRAY[u.prim]
                    ELSE array_prepend(u.prim, string_to_array(u.sec, E'\n')) END,
               u.data, p_ts, u.id
          FROM unnest(r_status, r_seq, p_primary, r_ver, p_secondary, p_data, p_ids)
               AS u(st, seq, prim, ver, sec, data, id)
         WHERE u.st = 0;
        IF any_secondary THEN
            INSERT INTO "{s}".entry_tags (tag, seqnum)
            SELECT x, u.seq
              FROM unnest(r_status, r_seq, p_secondary) AS u(st, seq, sec),
                   LATERAL unnest(string_to_array(u.sec, E'\n')) AS x
             WHERE u.st = 0 AND u.sec IS NOT NULL;
        END IF;
        INSERT INTO "{s}".streams AS st (tag, next_version)
        SELECT u.t, u.v FROM unnest(s_tags, s_next, s_start) AS u(t, v, v0)
         WHERE u.v <> u.v0
        ON CONFLICT (tag) DO UPDATE SET next_version = excluded.next_version;
        UPDATE "{s}".head SET next_seqnum = v_next WHERE id = 1;
        PERFORM pg_notify('{channel}', v_next::text);
    END IF;
    RETURN QUERY
        SELECT u.st, u.seq, u.ver, u.ts, u.tag, u.nx
          FROM unnest(r_status, r_seq, r_ver, r_ts, r_tag, r_next)
               WITH ORDINALITY AS u(st, seq, ver, ts, tag, nx, ord)
         ORDER BY u.ord;
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

/// Creates the log in `schema` if it is absent and checks its layout.
///
/// Concurrent installers (several processes opening a new log at once)
/// serialise on a transaction-scoped advisory lock, so `CREATE ... IF NOT
/// EXISTS` never races itself.
///
/// Errors: `NotFound` when the log is absent and `create` is false;
/// `Corrupt` when the schema holds a log of another layout
/// version; `PermissionDenied` when the role may not create it; the
/// connection kinds of [`errors::classify`].
pub(super) async fn install(client: &mut Client, schema: &str, create: bool) -> Result<()> {
    let op = Op::Read;
    let tx = client
        .transaction()
        .await
        .map_err(|e| errors::classify(e, op, "begin the schema install"))?;
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtext($1))",
        &[&format!("weft schema {schema}")],
    )
    .await
    .map_err(|e| errors::classify(e, op, "lock the schema install"))?;
    let existing = tx
        .query_opt(
            "SELECT 1 FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n \
             ON n.oid = p.pronamespace WHERE n.nspname = $1 AND p.proname = 'append'",
            &[&schema],
        )
        .await
        .map_err(|e| errors::classify(e, op, "look for the log's schema"))?;
    if existing.is_none() && !create {
        return Err(Error::new(
            crate::ErrorKind::NotFound,
            format!("no log {schema:?} in this database"),
        ));
    }
    if existing.is_none() {
        tx.batch_execute(&ddl(schema))
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
    tx.commit()
        .await
        .map_err(|e| errors::classify(e, op, "commit the schema install"))?;
    if layout != LAYOUT_VERSION {
        return Err(Error::corrupt(format!(
            "the log in schema {schema:?} has layout version {layout}; this weft reads {LAYOUT_VERSION}"
        )));
    }
    Ok(())
}
