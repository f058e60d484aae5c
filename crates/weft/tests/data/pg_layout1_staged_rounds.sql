-- A PostgreSQL log as weft's last build of layout version 1 (numbering
-- rounds that copy staged groups into `entries`) left it, dumped with
-- pg_dump --inserts after these appends through that build's `weft append`
-- and functions, with the log's schema written __LOG__:
--   #0 orders:1 v0 [customers:7] "placed 1"   id order-1
--   #1 orders:1 v1               "paid 1"     (--if-version 1)
--   #2 orders:2 v0               "placed 2"   id order-2
--   (a conditional append expecting version 5 of orders:1: refused)
--   (a retry of order-1: answered #0, nothing written)
--   #3 audit v0 [orders:2]       "bin\x01ary"
--   staged, never numbered (another session held the numbering lock):
--   group 1 = orders:3 "placed 3" id order-3, orders:3 [audit, customers:7]
--   "paid 3" (ts 1764790000000)
--   kv: ('views:orders', 'cursor') = \x2a
-- tests/pg_layout.rs installs it and opens the log with this build.


SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

CREATE SCHEMA __LOG__;

CREATE FUNCTION __LOG__.append(p_primary text[], p_secondary text[], p_data bytea[], p_expected bigint[], p_ids text[], p_batch_len integer[], p_ts bigint) RETURNS TABLE(status smallint, seqnum bigint, version bigint, ts bigint, tag text, next bigint)
    LANGUAGE plpgsql
    AS $$
#variable_conflict use_column
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
    IF array_remove(p_ids, NULL) <> '{}' THEN
        SELECT g.id INTO v_id FROM "__LOG__".staged g WHERE g.ids && p_ids ORDER BY g.id LIMIT 1;
        IF FOUND THEN
            RETURN QUERY SELECT 7::smallint, v_id, NULL::bigint, NULL::bigint, NULL::text, NULL::bigint;
            RETURN;
        END IF;
    END IF;
    INSERT INTO "__LOG__".staged (primary_tags, secondary, data, expected, ids, batch_len, ts)
        VALUES (p_primary, p_secondary, p_data, p_expected, p_ids, p_batch_len, p_ts)
        RETURNING staged.id INTO v_id;
    RETURN QUERY SELECT 4::smallint, v_id, NULL::bigint, NULL::bigint, NULL::text, NULL::bigint;
END
$$;

CREATE FUNCTION __LOG__.number(p_primary text[], p_secondary text[], p_data bytea[], p_expected bigint[], p_ids text[], p_batch_len integer[], p_ts bigint) RETURNS TABLE(status smallint, seqnum bigint, version bigint, ts bigint, tag text, next bigint)
    LANGUAGE plpgsql
    AS $$
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
    -- The round: the oldest groups staged and committed so far, as many
    -- as round_ids bounds, in staging order, then the caller's.
    WITH d AS MATERIALIZED (DELETE FROM "__LOG__".staged x
                             WHERE x.id = ANY (ARRAY(SELECT "__LOG__".round_ids()))
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
    -- A trailing '+' says the round left staged groups behind (it is
    -- bounded): everybody waiting asks at once, so the next round starts.
    PERFORM pg_notify('weft_settled___LOG__', coalesce(g_id[cardinality(g_id)]::text, '')
        || CASE WHEN EXISTS (SELECT 1 FROM "__LOG__".staged) THEN '+' ELSE '' END);
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
$$;

CREATE FUNCTION __LOG__.outcome_of(p_id bigint) RETURNS TABLE(status smallint, seqnum bigint, version bigint, ts bigint, tag text, next bigint)
    LANGUAGE plpgsql
    AS $$
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
            -- Still staged: the bounded round left it for the next one.
            RETURN QUERY SELECT CASE WHEN EXISTS (SELECT 1 FROM "__LOG__".staged g WHERE g.id = p_id)
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
$$;

CREATE FUNCTION __LOG__.outcomes_of(p_ids bigint[]) RETURNS TABLE(id bigint, status smallint, seqnum bigint, version bigint, ts bigint, tag text, next bigint)
    LANGUAGE plpgsql
    AS $$
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
    -- A group the round left staged (rounds are bounded) is pending, not
    -- unknown: the round's notification says more are staged, and the
    -- waiters ask again.
    RETURN QUERY SELECT x, CASE WHEN v_status = 5 AND EXISTS (SELECT 1 FROM "__LOG__".staged g WHERE g.id = x)
                                THEN 6::smallint ELSE v_status END,
                        NULL::bigint, NULL::bigint, NULL::bigint, NULL::text, NULL::bigint
        FROM unnest(v_left) AS x;
END
$$;

CREATE FUNCTION __LOG__.round_ids() RETURNS SETOF bigint
    LANGUAGE sql STABLE
    AS $$
    SELECT w.id FROM (
        SELECT x.id, sum(pg_column_size(x.data)) OVER (ORDER BY x.id)
                     - pg_column_size(x.data) AS before
          FROM (SELECT g.id, g.data FROM "__LOG__".staged g ORDER BY g.id
                 LIMIT coalesce(nullif(current_setting('weft.round_max_groups', true), '')::integer,
                                1024)) x) w
     WHERE w.before < coalesce(nullif(current_setting('weft.round_max_bytes', true), '')::bigint,
                               67108864)
     ORDER BY w.id
$$;

CREATE FUNCTION __LOG__.sweep(p_keep_ms bigint) RETURNS TABLE(first_seqnum bigint, next_seqnum bigint, dead_rows bigint)
    LANGUAGE plpgsql
    AS $$
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
$$;

CREATE FUNCTION __LOG__."trim"(p_through bigint) RETURNS TABLE(first_seqnum bigint, next_seqnum bigint)
    LANGUAGE plpgsql
    AS $$
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
$$;

SET default_tablespace = '';

SET default_table_access_method = heap;

CREATE TABLE __LOG__.entries (
    seqnum bigint NOT NULL,
    primary_tag text NOT NULL,
    version bigint NOT NULL,
    tags text[] NOT NULL,
    data bytea NOT NULL,
    ts bigint NOT NULL,
    append_id text
);

CREATE TABLE __LOG__.entry_tags (
    tag text NOT NULL,
    seqnum bigint NOT NULL
);

CREATE TABLE __LOG__.head (
    id integer NOT NULL,
    next_seqnum bigint NOT NULL,
    first_seqnum bigint NOT NULL,
    layout integer NOT NULL,
    CONSTRAINT head_id_check CHECK ((id = 1))
)
WITH (fillfactor='10');

CREATE TABLE __LOG__.kv (
    scope text NOT NULL,
    key text NOT NULL,
    value bytea NOT NULL
);

CREATE TABLE __LOG__.outcomes (
    id bigint NOT NULL,
    status smallint[] NOT NULL,
    seqnum bigint[] NOT NULL,
    version bigint[] NOT NULL,
    ts bigint[] NOT NULL,
    tag text[] NOT NULL,
    next bigint[] NOT NULL,
    numbered_ms bigint NOT NULL
)
WITH (vacuum_truncate='false');

CREATE TABLE __LOG__.staged (
    id bigint NOT NULL,
    primary_tags text[] NOT NULL,
    secondary text[] NOT NULL,
    data bytea[] NOT NULL,
    expected bigint[] NOT NULL,
    ids text[] NOT NULL,
    batch_len integer[] NOT NULL,
    ts bigint NOT NULL
)
WITH (vacuum_truncate='false');

CREATE SEQUENCE __LOG__.staged_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE __LOG__.staged_id_seq OWNED BY __LOG__.staged.id;

CREATE TABLE __LOG__.streams (
    tag text NOT NULL,
    next_version bigint NOT NULL
)
WITH (fillfactor='50');

ALTER TABLE ONLY __LOG__.staged ALTER COLUMN id SET DEFAULT nextval('__LOG__.staged_id_seq'::regclass);

INSERT INTO __LOG__.entries VALUES (0, 'orders:1', 0, '{orders:1,customers:7}', '\x706c616365642031', 1796321747635, 'order-1');
INSERT INTO __LOG__.entries VALUES (1, 'orders:1', 1, '{orders:1}', '\x706169642031', 1796321747691, NULL);
INSERT INTO __LOG__.entries VALUES (2, 'orders:2', 0, '{orders:2}', '\x706c616365642032', 1796321747734, 'order-2');
INSERT INTO __LOG__.entries VALUES (3, 'audit', 0, '{audit,orders:2}', '\x62696e01617279', 1796321747849, NULL);

INSERT INTO __LOG__.entry_tags VALUES ('customers:7', 0);
INSERT INTO __LOG__.entry_tags VALUES ('orders:2', 3);

INSERT INTO __LOG__.head VALUES (1, 4, 0, 1);

INSERT INTO __LOG__.kv VALUES ('views:orders', 'cursor', '\x2a');

INSERT INTO __LOG__.staged VALUES (1, '{orders:3,orders:3}', '{NULL,"audit
customers:7"}', '{"\\x706c616365642033","\\x706169642033"}', '{NULL,NULL}', '{order-3,NULL}', '{2}', 1764790000000);

INSERT INTO __LOG__.streams VALUES ('orders:1', 2);
INSERT INTO __LOG__.streams VALUES ('orders:2', 1);
INSERT INTO __LOG__.streams VALUES ('audit', 1);

SELECT pg_catalog.setval('__LOG__.staged_id_seq', 1, true);

ALTER TABLE ONLY __LOG__.entries
    ADD CONSTRAINT entries_pkey PRIMARY KEY (seqnum);

ALTER TABLE ONLY __LOG__.entry_tags
    ADD CONSTRAINT entry_tags_pkey PRIMARY KEY (tag, seqnum);

ALTER TABLE ONLY __LOG__.head
    ADD CONSTRAINT head_pkey PRIMARY KEY (id);

ALTER TABLE ONLY __LOG__.kv
    ADD CONSTRAINT kv_pkey PRIMARY KEY (scope, key);

ALTER TABLE ONLY __LOG__.outcomes
    ADD CONSTRAINT outcomes_pkey PRIMARY KEY (id);

ALTER TABLE ONLY __LOG__.staged
    ADD CONSTRAINT staged_pkey PRIMARY KEY (id);

ALTER TABLE ONLY __LOG__.streams
    ADD CONSTRAINT streams_pkey PRIMARY KEY (tag);

CREATE UNIQUE INDEX entries_append_id ON __LOG__.entries USING btree (append_id) WHERE (append_id IS NOT NULL);

CREATE INDEX entries_tag ON __LOG__.entries USING btree (primary_tag, seqnum);

CREATE UNIQUE INDEX entries_version ON __LOG__.entries USING btree (primary_tag, version);


