-- The tables and functions of a PostgreSQL log as weft's build before
-- bounded rounds installed them (layout version 1), with the log's schema
-- written __LOG__. tests/pg_wedge.rs installs it, appends through these
-- functions, and opens the log with this build.

CREATE SCHEMA IF NOT EXISTS "__LOG__";
CREATE TABLE IF NOT EXISTS "__LOG__".head (
    id integer PRIMARY KEY CHECK (id = 1),
    next_seqnum bigint NOT NULL,
    first_seqnum bigint NOT NULL,
    layout integer NOT NULL
) WITH (fillfactor = 10);
INSERT INTO "__LOG__".head (id, next_seqnum, first_seqnum, layout)
    VALUES (1, 0, 0, 1) ON CONFLICT (id) DO NOTHING;
CREATE TABLE IF NOT EXISTS "__LOG__".streams (
    tag text PRIMARY KEY,
    next_version bigint NOT NULL
) WITH (fillfactor = 50);
CREATE TABLE IF NOT EXISTS "__LOG__".entries (
    seqnum bigint PRIMARY KEY,
    primary_tag text NOT NULL,
    version bigint NOT NULL,
    tags text[] NOT NULL,
    data bytea NOT NULL,
    ts bigint NOT NULL,
    append_id text
);
CREATE UNIQUE INDEX IF NOT EXISTS entries_version ON "__LOG__".entries (primary_tag, version);
CREATE INDEX IF NOT EXISTS entries_tag ON "__LOG__".entries (primary_tag, seqnum);
CREATE UNIQUE INDEX IF NOT EXISTS entries_append_id ON "__LOG__".entries (append_id)
    WHERE append_id IS NOT NULL;
CREATE TABLE IF NOT EXISTS "__LOG__".entry_tags (
    tag text NOT NULL,
    seqnum bigint NOT NULL,
    PRIMARY KEY (tag, seqnum)
);
CREATE TABLE IF NOT EXISTS "__LOG__".staged (
    id bigserial PRIMARY KEY,
    primary_tags text[] NOT NULL,
    secondary text[] NOT NULL,
    data bytea[] NOT NULL,
    expected bigint[] NOT NULL,
    ids text[] NOT NULL,
    batch_len integer[] NOT NULL,
    ts bigint NOT NULL
) WITH (vacuum_truncate = false);
CREATE TABLE IF NOT EXISTS "__LOG__".outcomes (
    id bigint PRIMARY KEY,
    status smallint[] NOT NULL,
    seqnum bigint[] NOT NULL,
    version bigint[] NOT NULL,
    ts bigint[] NOT NULL,
    tag text[] NOT NULL,
    next bigint[] NOT NULL,
    numbered_ms bigint NOT NULL
) WITH (vacuum_truncate = false);
CREATE TABLE IF NOT EXISTS "__LOG__".kv (
    scope text NOT NULL,
    key text NOT NULL,
    value bytea NOT NULL,
    PRIMARY KEY (scope, key)
);

-- Appends land in two steps. A group first tries to take the log's
-- numbering lock (a transaction-scoped advisory lock, never waited for
-- here). The taker numbers the group itself, together with every group
-- other processes staged meanwhile (number below), in this one
-- transaction. Everyone else stages the group (one row, committed at
-- once without waiting for its flush) and then learns its outcome from
-- outcome_of.
--
-- Arguments, per entry: primary tag, secondary tags joined by a newline
-- (tags hold no control characters) or NULL, payload, expected version or
-- NULL, append id or NULL; p_batch_len splits the entries into atomic
-- batches (an id appears at most once per batch). Returns one row per
-- entry, in order:
--   status 0 written (seqnum, version, ts)
--   status 1 its append id was already in the log (the original's seqnum,
--            version, ts, primary tag)
--   status 2 its condition failed (version = expected, next = the
--            stream's next version); its batch is not written
--   status 3 not written because another entry of its batch failed
-- or, when the group was staged, one row: status 4, seqnum = its id.
CREATE OR REPLACE FUNCTION "__LOG__".append(
    p_primary text[], p_secondary text[], p_data bytea[], p_expected bigint[],
    p_ids text[], p_batch_len integer[], p_ts bigint)
RETURNS TABLE (status smallint, seqnum bigint, version bigint, ts bigint, tag text, next bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
    v_id bigint;
BEGIN
    IF pg_try_advisory_xact_lock((2003134068::bigint << 32) | ('"__LOG__".head'::regclass::oid::bigint)) THEN
        RETURN QUERY SELECT * FROM "__LOG__".number(p_primary, p_secondary, p_data,
            p_expected, p_ids, p_batch_len, p_ts);
        RETURN;
    END IF;
    -- The staged row needs no flush of its own: the round that numbers it
    -- commits durably, after it in the WAL, before anyone hears an
    -- outcome; a crash that loses it leaves the appender's outcome unknown
    -- (Indeterminate), as any failure after staging does. Waiting for this
    -- flush was most of a staged append's time (wait event WALWrite).
    PERFORM set_config('synchronous_commit', 'off', true);
    INSERT INTO "__LOG__".staged (primary_tags, secondary, data, expected, ids, batch_len, ts)
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
CREATE OR REPLACE FUNCTION "__LOG__".outcome_of(p_id bigint)
RETURNS TABLE (status smallint, seqnum bigint, version bigint, ts bigint, tag text, next bigint)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    o record;
BEGIN
    DELETE FROM "__LOG__".outcomes x WHERE x.id = p_id RETURNING x.* INTO o;
    IF FOUND THEN
        -- Only the outcome row went: nothing here needs a durable commit
        -- (the numbering transaction was).
        PERFORM set_config('synchronous_commit', 'off', true);
    ELSIF pg_try_advisory_xact_lock((2003134068::bigint << 32) | ('"__LOG__".head'::regclass::oid::bigint)) THEN
        PERFORM 1 FROM "__LOG__".number(NULL, NULL, NULL, NULL, NULL, NULL, NULL);
        DELETE FROM "__LOG__".outcomes x WHERE x.id = p_id RETURNING x.* INTO o;
        IF NOT FOUND THEN
            RETURN QUERY SELECT 5::smallint, p_id, NULL::bigint, NULL::bigint, NULL::text, NULL::bigint;
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
CREATE OR REPLACE FUNCTION "__LOG__".outcomes_of(p_ids bigint[])
RETURNS TABLE (id bigint, status smallint, seqnum bigint, version bigint, ts bigint, tag text, next bigint)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    o record;
    v_left bigint[] := coalesce(p_ids, '{}');
    v_status smallint := 6;
BEGIN
    FOR o IN DELETE FROM "__LOG__".outcomes x WHERE x.id = ANY (v_left) RETURNING x.* LOOP
        v_left := array_remove(v_left, o.id);
        RETURN QUERY SELECT o.id, u.st, u.seq, u.ver, u.t, u.tg, u.nx FROM unnest(o.status, o.seqnum, o.version, o.ts, o.tag, o.next)
            WITH ORDINALITY AS u(st, seq, ver, t, tg, nx, ord) ORDER BY u.ord;
    END LOOP;
    IF v_left <> '{}' AND pg_try_advisory_xact_lock((2003134068::bigint << 32) | ('"__LOG__".head'::regclass::oid::bigint)) THEN
        PERFORM 1 FROM "__LOG__".number(NULL, NULL, NULL, NULL, NULL, NULL, NULL);
        v_status := 5;
        FOR o IN DELETE FROM "__LOG__".outcomes x WHERE x.id = ANY (v_left) RETURNING x.* LOOP
            v_left := array_remove(v_left, o.id);
            RETURN QUERY SELECT o.id, u.st, u.seq, u.ver, u.t, u.tg, u.nx FROM unnest(o.status, o.seqnum, o.version, o.ts, o.tag, o.next)
                WITH ORDINALITY AS u(st, seq, ver, t, tg, nx, ord) ORDER BY u.ord;
        END LOOP;
    ELSE
        -- Only outcome rows went: the rounds' commits were the durable ones.
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
    RETURN QUERY SELECT x, v_status, NULL::bigint, NULL::bigint, NULL::bigint, NULL::text, NULL::bigint
        FROM unnest(v_left) AS x;
END
$fn$;

-- Numbers every staged group and then the caller's own group (NULL
-- arrays: none) in one round, under the numbering lock the caller holds.
-- Staged groups' outcomes go to the outcomes table; the own group's are
-- returned.
CREATE OR REPLACE FUNCTION "__LOG__".number(
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
    d_ids text[] := '{}';
    d_seq bigint[];
    d_ver bigint[];
    d_ts bigint[];
    d_tag text[];
    c_ids text[] := '{}';
    c_idx integer[] := '{}';
    b integer;
    i integer := 1;
    j integer;
    k integer;
    t integer;
    b_end integer;
    seq bigint;
    ok boolean;
BEGIN
    SELECT h.next_seqnum INTO v_next FROM "__LOG__".head h WHERE h.id = 1 FOR UPDATE;
    v_start := v_next;
    -- The round: every group staged and committed so far, in staging
    -- order, then the caller's.
    WITH d AS MATERIALIZED (DELETE FROM "__LOG__".staged RETURNING *),
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
        e_primary := coalesce(e_primary, '{}') || p_primary;
        e_secondary := coalesce(e_secondary, '{}') || p_secondary;
        e_data := coalesce(e_data, '{}') || p_data;
        e_expected := coalesce(e_expected, '{}') || p_expected;
        e_ids := coalesce(e_ids, '{}') || p_ids;
        e_ts := coalesce(e_ts, '{}') || array_fill(p_ts, ARRAY[cardinality(p_data)]);
        b_len := coalesce(b_len, '{}') || p_batch_len;
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
    SELECT coalesce(array_agg(d.t ORDER BY d.t), '{}'),
           coalesce(array_agg(coalesce(st.next_version, 0) ORDER BY d.t), '{}')
      INTO s_tags, s_next
      FROM (SELECT DISTINCT x AS t FROM unnest(e_primary) x) d
      LEFT JOIN "__LOG__".streams st ON st.tag = d.t;
    s_start := s_next;
    SELECT array_agg(k.ix ORDER BY u.o) INTO e_tix
      FROM unnest(e_primary) WITH ORDINALITY AS u(t, o)
      JOIN unnest(s_tags) WITH ORDINALITY AS k(t, ix) ON k.t = u.t;
    IF array_remove(e_expected, NULL) = '{}' AND array_remove(e_ids, NULL) = '{}' THEN
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
        IF array_remove(e_ids, NULL) <> '{}' THEN
            SELECT coalesce(array_agg(e.append_id), '{}'), array_agg(e.seqnum),
                   array_agg(e.version), array_agg(e.ts), array_agg(e.primary_tag)
              INTO d_ids, d_seq, d_ver, d_ts, d_tag
              FROM "__LOG__".entries e WHERE e.append_id = ANY (e_ids);
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
                IF e_expected[j] IS NOT NULL AND e_expected[j] <> s_next[t] THEN
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
        INSERT INTO "__LOG__".entries (seqnum, primary_tag, version, tags, data, ts, append_id)
        SELECT u.seq, u.prim, u.ver,
               CASE WHEN u.sec IS NULL THEN ARRAY[u.prim]
                    ELSE array_prepend(u.prim, string_to_array(u.sec, E'\n')) END,
               u.data, u.ts, u.id
          FROM unnest(r_status, r_seq, e_primary, r_ver, e_secondary, e_data, r_ts, e_ids)
               AS u(st, seq, prim, ver, sec, data, ts, id)
         WHERE u.st = 0;
        IF array_remove(e_secondary, NULL) <> '{}' THEN
            INSERT INTO "__LOG__".entry_tags (tag, seqnum)
            SELECT x, u.seq
              FROM unnest(r_status, r_seq, e_secondary) AS u(st, seq, sec),
                   LATERAL unnest(string_to_array(u.sec, E'\n')) AS x
             WHERE u.st = 0 AND u.sec IS NOT NULL;
        END IF;
        INSERT INTO "__LOG__".streams AS st (tag, next_version)
        SELECT u.t, u.v FROM unnest(s_tags, s_next, s_start) AS u(t, v, v0)
         WHERE u.v <> u.v0
        ON CONFLICT (tag) DO UPDATE SET next_version = excluded.next_version;
        UPDATE "__LOG__".head SET next_seqnum = v_next WHERE id = 1;
    END IF;
    -- Every round that decided something tells the log's channel at its
    -- commit: subscribers read on, and appenders whose groups were staged
    -- collect their outcomes (or run the next round).
    PERFORM pg_notify('weft___LOG__', v_next::text);
    -- The highest staged id this round settled (g_id is in id order): a
    -- waiting appender whose group's id is above it knows, without
    -- asking, that this round did not settle it.
    PERFORM pg_notify('weft_settled___LOG__', coalesce(g_id[cardinality(g_id)]::text, ''));
    IF n_staged > 0 THEN
        INSERT INTO "__LOG__".outcomes (id, status, seqnum, version, ts, tag, next, numbered_ms)
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
CREATE OR REPLACE FUNCTION "__LOG__".sweep(p_keep_ms bigint)
RETURNS TABLE (first_seqnum bigint, next_seqnum bigint, dead_rows bigint)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
BEGIN
    IF EXISTS (SELECT 1 FROM "__LOG__".staged) AND pg_try_advisory_xact_lock((2003134068::bigint << 32) | ('"__LOG__".head'::regclass::oid::bigint)) THEN
        PERFORM 1 FROM "__LOG__".number(NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    ELSE
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;
    DELETE FROM "__LOG__".outcomes x
     WHERE x.numbered_ms < (extract(epoch FROM clock_timestamp()) * 1000)::bigint - p_keep_ms;
    RETURN QUERY SELECT h.first_seqnum, h.next_seqnum,
                        pg_stat_get_dead_tuples('"__LOG__".staged'::regclass)
                        + pg_stat_get_dead_tuples('"__LOG__".outcomes'::regclass)
                   FROM "__LOG__".head h WHERE h.id = 1;
END
$fn$;

-- Moves the trim point to p_through + 1 under the head lock (a few
-- microseconds; the rows go later, outside the lock). Returns the head
-- after the call; nothing changes when p_through >= next_seqnum.
CREATE OR REPLACE FUNCTION "__LOG__".trim(p_through bigint)
RETURNS TABLE (first_seqnum bigint, next_seqnum bigint)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_first bigint;
    v_next bigint;
BEGIN
    SELECT h.first_seqnum, h.next_seqnum INTO v_first, v_next
      FROM "__LOG__".head h WHERE h.id = 1 FOR UPDATE;
    IF p_through < v_next AND p_through + 1 > v_first THEN
        v_first := p_through + 1;
        UPDATE "__LOG__".head SET first_seqnum = v_first WHERE id = 1;
    END IF;
    RETURN QUERY SELECT v_first, v_next;
END
$fn$;
