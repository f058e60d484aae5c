-- Which revision of these functions the log holds. A build whose file
-- says more replaces them at open (every signature stays, so processes of
-- older builds keep working on the log); one that says less leaves them.
-- Revision 2: the settled notification names the oldest group still
-- staged. (Logs whose functions predate this one are revision 1.)
CREATE OR REPLACE FUNCTION "__LOG__".functions_revision()
RETURNS integer
LANGUAGE sql IMMUTABLE AS $fn$
    SELECT __FUNCTIONS_REVISION__
$fn$;

-- Whether an entry's condition holds: p_expected is what its appender
-- asked for, p_next the version its stream would give it now (0 for a
-- stream with no entry). p_expected: NULL, no condition; -1, the stream
-- exists (its next version is above 0); otherwise the exact version the
-- entry must get (0: the stream does not exist yet). Every condition of
-- every round is decided here and nowhere else; a new kind of condition is
-- a new spelling of p_expected and a new case here.
CREATE OR REPLACE FUNCTION "__LOG__".condition_holds(p_expected bigint, p_next bigint)
RETURNS boolean
LANGUAGE sql IMMUTABLE AS $fn$
    SELECT p_expected IS NULL
        OR CASE WHEN p_expected = -1 THEN p_next > 0 ELSE p_expected = p_next END
$fn$;

-- The staged groups a round of this transaction told on the told channel
-- (number, below): their outcome is on its way to their appenders.
CREATE OR REPLACE FUNCTION "__LOG__".told_now()
RETURNS bigint[]
LANGUAGE sql STABLE AS $fn$
    SELECT coalesce(string_to_array(nullif(current_setting('weft.told', true), ''), ',')::bigint[],
                    '{}')
$fn$;

-- The append of this build: as append (below), except that a group it
-- stages has its payloads written into `payloads`, once, by this
-- transaction (committed without waiting for its flush, like a staged
-- row: the round that numbers the group commits durably after it in the
-- WAL), and the `staged` row carries only the group's tags, conditions
-- and ids. The round that numbers it then writes each entry's numbers and
-- a reference to its payload row; the payload is never copied.
CREATE OR REPLACE FUNCTION "__LOG__".append_group(
    p_primary text[], p_secondary text[], p_data bytea[], p_expected bigint[],
    p_ids text[], p_batch_len integer[], p_ts bigint)
RETURNS TABLE (status smallint, seqnum bigint, version bigint, ts bigint, tag text, next bigint)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_id bigint;
BEGIN
    IF pg_try_advisory_xact_lock(__LOCK_KEY__) THEN
        RETURN QUERY SELECT * FROM "__LOG__".number_taken(p_primary, p_secondary, p_data,
            p_expected, p_ids, p_batch_len, p_ts);
        RETURN;
    END IF;
    PERFORM set_config('synchronous_commit', 'off', true);
    IF array_remove(p_ids, NULL) <> '{}' THEN
        SELECT g.id INTO v_id FROM "__LOG__".staged g WHERE g.ids && p_ids ORDER BY g.id LIMIT 1;
        IF FOUND THEN
            -- A retry while the first try waits: nothing is written, not
            -- even the payloads.
            RETURN QUERY SELECT 7::smallint, v_id, NULL::bigint, NULL::bigint, NULL::text, NULL::bigint;
            RETURN;
        END IF;
    END IF;
    INSERT INTO "__LOG__".staged (primary_tags, secondary, data, expected, ids, batch_len, ts,
                                payload_bytes)
        VALUES (p_primary, p_secondary, '{}', p_expected, p_ids, p_batch_len, p_ts,
                (SELECT coalesce(sum(octet_length(x)), 0) FROM unnest(p_data) AS x))
        RETURNING staged.id INTO v_id;
    INSERT INTO "__LOG__".payloads (group_id, ord, data)
        SELECT v_id, u.o, u.d FROM unnest(p_data) WITH ORDINALITY AS u(d, o);
    RETURN QUERY SELECT 4::smallint, v_id, NULL::bigint, NULL::bigint, NULL::text, NULL::bigint;
END
$fn$;

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
-- or, when the group was staged, one row: status 4, seqnum = its id;
-- or, when an append id of the group is in a group still staged (a retry
-- while the first try waits), one row: status 7, seqnum = that group's
-- id. Nothing was staged: the caller asks again after the next round, so
-- a retried payload is never staged twice.
CREATE OR REPLACE FUNCTION "__LOG__".append(
    p_primary text[], p_secondary text[], p_data bytea[], p_expected bigint[],
    p_ids text[], p_batch_len integer[], p_ts bigint)
RETURNS TABLE (status smallint, seqnum bigint, version bigint, ts bigint, tag text, next bigint)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_id bigint;
BEGIN
    IF pg_try_advisory_xact_lock(__LOCK_KEY__) THEN
        RETURN QUERY SELECT * FROM "__LOG__".number_taken(p_primary, p_secondary, p_data,
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
    ELSIF pg_try_advisory_xact_lock(__LOCK_KEY__) THEN
        PERFORM 1 FROM "__LOG__".number(NULL, NULL, NULL, NULL, NULL, NULL, NULL);
        DELETE FROM "__LOG__".outcomes x WHERE x.id = p_id RETURNING x.* INTO o;
        IF NOT FOUND THEN
            -- Still staged: the bounded round left it for the next one.
            RETURN QUERY SELECT CASE WHEN EXISTS (SELECT 1 FROM "__LOG__".staged g WHERE g.id = p_id)
                                          OR p_id = ANY ("__LOG__".told_now())
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
    IF v_left <> '{}' AND pg_try_advisory_xact_lock(__LOCK_KEY__) THEN
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
    RETURN QUERY SELECT x, CASE WHEN v_status = 5 AND (EXISTS (SELECT 1 FROM "__LOG__".staged g WHERE g.id = x)
                                     OR x = ANY ("__LOG__".told_now()))
                                THEN 6::smallint ELSE v_status END,
                        NULL::bigint, NULL::bigint, NULL::bigint, NULL::text, NULL::bigint
        FROM unnest(v_left) AS x;
END
$fn$;

-- The staged groups the next round takes: the oldest, at most
-- weft.round_max_groups of them (default __ROUND_MAX_GROUPS__) and no more payload
-- than weft.round_max_bytes (default __ROUND_MAX_BYTES__) besides the first group. A
-- round over every staged group had no bound: past statement_timeout, or
-- past PostgreSQL's 1 GiB array limit, every round failed and rolled back
-- while the backlog grew. pg_column_size reads the stored size without
-- fetching the payload; a group whose payloads its appender wrote into
-- `payloads` counts the bytes it recorded (payload_bytes), so the bound
-- means the same for both kinds of group. (The two settings are custom parameters a
-- connection may set, so a test can make rounds small.)
CREATE OR REPLACE FUNCTION "__LOG__".round_ids()
RETURNS SETOF bigint
LANGUAGE sql STABLE AS $fn$
    SELECT w.id FROM (
        SELECT x.id, sum(x.bytes) OVER (ORDER BY x.id) - x.bytes AS before
          FROM (SELECT g.id, coalesce(g.payload_bytes, pg_column_size(g.data)) AS bytes FROM "__LOG__".staged g ORDER BY g.id
                 LIMIT coalesce(nullif(current_setting('weft.round_max_groups', true), '')::integer,
                                __ROUND_MAX_GROUPS__)) x) w
     WHERE w.before < coalesce(nullif(current_setting('weft.round_max_bytes', true), '')::bigint,
                               __ROUND_MAX_BYTES__)
     ORDER BY w.id
$fn$;

-- The round of a caller whose group is all there is to number: nothing
-- staged, no condition, no append id (every group of a lone process that
-- asks for neither). It gives such a group exactly the numbers number()
-- would, in one statement where number() runs some twenty: at one process
-- the round is most of an append's server time.
CREATE OR REPLACE FUNCTION "__LOG__".number_own(
    p_primary text[], p_secondary text[], p_data bytea[], p_ts bigint)
RETURNS TABLE (status smallint, seqnum bigint, version bigint, ts bigint, tag text, next bigint)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_next bigint;
BEGIN
    RETURN QUERY
    WITH h AS (UPDATE "__LOG__".head x SET next_seqnum = x.next_seqnum + cardinality(p_data)
                WHERE x.id = 1 RETURNING x.next_seqnum - cardinality(p_data) AS start),
         -- Timestamps never go back within the log (number() says why).
         l AS (SELECT greatest(p_ts, coalesce((SELECT e.ts FROM "__LOG__".numbered e, h
                                                WHERE e.seqnum = h.start - 1), 0)) AS ts),
         u AS (SELECT x.t, x.sec, x.d, x.o,
                      row_number() OVER (PARTITION BY x.t ORDER BY x.o) AS rn
                 FROM unnest(p_primary, p_secondary, p_data) WITH ORDINALITY AS x(t, sec, d, o)),
         s AS (SELECT c.t, coalesce(st.next_version, 0) AS nv, c.cnt
                 FROM (SELECT u.t, count(*) AS cnt FROM u GROUP BY u.t) c
                 LEFT JOIN "__LOG__".streams st ON st.tag = c.t),
         ins AS (INSERT INTO "__LOG__".numbered (seqnum, primary_tag, version, tags, data, ts)
                 SELECT h.start + u.o - 1, u.t, s.nv + u.rn - 1,
                        CASE WHEN u.sec IS NULL THEN ARRAY[u.t]
                             ELSE array_prepend(u.t, string_to_array(u.sec, E'\n')) END,
                        u.d, l.ts
                   FROM u JOIN s ON s.t = u.t, h, l
                 RETURNING numbered.seqnum AS q, numbered.version AS v, numbered.ts AS w,
                           numbered.tags AS g),
         et AS (INSERT INTO "__LOG__".entry_tags (tag, seqnum)
                SELECT x, i.q FROM ins i, LATERAL unnest(i.g[2:]) AS x),
         up AS (INSERT INTO "__LOG__".streams AS st (tag, next_version)
                SELECT s.t, s.nv + s.cnt FROM s
                ON CONFLICT (tag) DO UPDATE SET next_version = excluded.next_version)
    SELECT 0::smallint, i.q, i.v, i.w, NULL::text, NULL::bigint FROM ins i ORDER BY i.q;
    SELECT h.next_seqnum INTO v_next FROM "__LOG__".head h WHERE h.id = 1;
    -- The notifications number() sends for such a round (it settled no
    -- staged group; groups staged since are named, see number()).
    PERFORM pg_notify('__CHANNEL__', v_next::text);
    PERFORM pg_notify('__SETTLED__', coalesce('+' || (SELECT min(s.id) FROM "__LOG__".staged s)::text, ''));
END
$fn$;

-- The round of an appender that took the numbering lock (append,
-- append_group): number_own when its group is all there is to number,
-- otherwise number.
CREATE OR REPLACE FUNCTION "__LOG__".number_taken(
    p_primary text[], p_secondary text[], p_data bytea[], p_expected bigint[],
    p_ids text[], p_batch_len integer[], p_ts bigint)
RETURNS TABLE (status smallint, seqnum bigint, version bigint, ts bigint, tag text, next bigint)
LANGUAGE plpgsql AS $fn$
BEGIN
    IF cardinality(p_data) > 0 AND array_remove(p_expected, NULL) = '{}'
       AND array_remove(p_ids, NULL) = '{}' AND NOT EXISTS (SELECT 1 FROM "__LOG__".staged) THEN
        RETURN QUERY SELECT * FROM "__LOG__".number_own(p_primary, p_secondary, p_data, p_ts);
    ELSE
        RETURN QUERY SELECT * FROM "__LOG__".number(p_primary, p_secondary, p_data,
            p_expected, p_ids, p_batch_len, p_ts);
    END IF;
END
$fn$;

-- Numbers the oldest staged groups (round_ids) and then the caller's own group (NULL
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
    e_gid bigint[];
    e_ord integer[];
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
    v_told bigint[] := '{}';
    v_pick bigint[];
    v_group record;
    v_msg text := '';
    v_item record;
    last_ts bigint;
BEGIN
    SELECT h.next_seqnum INTO v_next FROM "__LOG__".head h WHERE h.id = 1 FOR UPDATE;
    v_start := v_next;
    -- The round: the oldest groups staged and committed so far, as many
    -- as round_ids bounds, in staging order, then the caller's.
    IF EXISTS (SELECT 1 FROM "__LOG__".staged) THEN
        -- Group by group in id order, each group's arrays appended whole
        -- (one sort, of the groups; gathering them with ordered
        -- aggregates sorted every column's entries apart).
        v_pick := ARRAY(SELECT r.id FROM "__LOG__".round_ids() AS r(id));
        FOR v_group IN SELECT x.* FROM "__LOG__".staged x WHERE x.id = ANY (v_pick) ORDER BY x.id LOOP
            k := cardinality(v_group.primary_tags);
            g_id := g_id || v_group.id;
            g_len := g_len || k;
            b_len := b_len || v_group.batch_len;
            e_primary := e_primary || v_group.primary_tags;
            e_secondary := e_secondary || v_group.secondary;
            e_expected := e_expected || v_group.expected;
            e_ids := e_ids || v_group.ids;
            e_ts := e_ts || array_fill(v_group.ts, ARRAY[k]);
            IF v_group.payload_bytes IS NULL THEN
                -- Layout 1's staging: the payloads are in the row.
                e_data := e_data || v_group.data;
                e_gid := e_gid || array_fill(NULL::bigint, ARRAY[k]);
                e_ord := e_ord || array_fill(NULL::integer, ARRAY[k]);
            ELSE
                e_data := e_data || array_fill(NULL::bytea, ARRAY[k]);
                e_gid := e_gid || array_fill(v_group.id, ARRAY[k]);
                e_ord := e_ord || ARRAY(SELECT generate_series(1, k));
            END IF;
        END LOOP;
        DELETE FROM "__LOG__".staged x WHERE x.id = ANY (g_id);
    END IF;
    n_staged := coalesce(cardinality(e_primary), 0);
    IF p_data IS NOT NULL THEN
        e_primary := coalesce(e_primary, '{}') || p_primary;
        e_secondary := coalesce(e_secondary, '{}') || p_secondary;
        e_data := coalesce(e_data, '{}') || p_data;
        e_expected := coalesce(e_expected, '{}') || p_expected;
        e_ids := coalesce(e_ids, '{}') || p_ids;
        e_ts := coalesce(e_ts, '{}') || array_fill(p_ts, ARRAY[cardinality(p_data)]);
        b_len := coalesce(b_len, '{}') || p_batch_len;
        e_gid := coalesce(e_gid, '{}') || array_fill(NULL::bigint, ARRAY[cardinality(p_data)]);
        e_ord := coalesce(e_ord, '{}') || array_fill(NULL::integer, ARRAY[cardinality(p_data)]);
    END IF;
    n := coalesce(cardinality(e_primary), 0);
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
              FROM "__LOG__".numbered e WHERE e.append_id = ANY (e_ids);
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
                IF NOT "__LOG__".condition_holds(e_expected[j], s_next[t]) THEN
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
        SELECT e.ts INTO last_ts FROM "__LOG__".numbered e WHERE e.seqnum = v_start - 1;
        last_ts := coalesce(last_ts, 0);
        FOR j IN 1 .. n LOOP
            IF r_status[j] = 0 THEN
                r_ts[j] := greatest(r_ts[j], last_ts);
                last_ts := r_ts[j];
            END IF;
        END LOOP;
        -- A referenced entry's row points at its payload (group_id, ord):
        -- the payload was written once, by its appender, and is not
        -- copied here.
        INSERT INTO "__LOG__".numbered (seqnum, primary_tag, version, tags, data, ts, append_id,
                                      group_id, ord)
        SELECT u.seq, u.prim, u.ver,
               CASE WHEN u.sec IS NULL THEN ARRAY[u.prim]
                    ELSE array_prepend(u.prim, string_to_array(u.sec, E'\n')) END,
               u.data, u.ts, u.id, u.gid, u.o
          FROM unnest(r_status, r_seq, e_primary, r_ver, e_secondary, e_data, r_ts, e_ids,
                      e_gid, e_ord)
               AS u(st, seq, prim, ver, sec, data, ts, id, gid, o)
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
    -- Payloads of referenced entries the round did not write (a condition
    -- of their batch failed, or their append id was in the log already)
    -- go with it: nothing will ever point at them, and no reader saw them.
    IF EXISTS (SELECT 1 FROM unnest(r_status, e_gid) AS u(st, gid)
                WHERE u.gid IS NOT NULL AND u.st <> 0) THEN
        DELETE FROM "__LOG__".payloads p USING unnest(r_status, e_gid, e_ord) AS u(st, gid, o)
         WHERE u.gid IS NOT NULL AND u.st <> 0 AND p.group_id = u.gid AND p.ord = u.o;
    END IF;
    -- Every round that decided something tells the log's channel at its
    -- commit: subscribers read on, and appenders whose groups were staged
    -- collect their outcomes (or run the next round).
    PERFORM pg_notify('__CHANNEL__', v_next::text);
    -- The highest staged id this round settled (g_id is in id order): a
    -- waiting appender whose group's id is above it knows, without
    -- asking, that this round did not settle it.
    -- '+' and an id follow when groups are staged as the round ends (it
    -- is bounded, or they were staged while it ran): the oldest of them.
    -- Its appender's handle starts the next round (outcomes_of runs one
    -- when the lock is free); a waiting group with a higher id leaves it
    -- to that handle, since that round will see it, and one with a lower
    -- id was committed after this look, so its own handle starts one.
    -- One handle asks per round, not every handle with a group waiting.
    -- Groups staged by append_group all of whose entries were written are
    -- told on the log's told channel instead of getting an outcomes row
    -- their appender would have to fetch. An item is "id:first
    -- seqnum:versions", the versions being those of the group's first
    -- entry of each primary tag, in the order those tags first appear in
    -- the group: the appender, which knows its entries, derives every
    -- entry's numbers from it. A notification holds at most 8000 bytes, so
    -- the items go in as many as they need, all before the settled
    -- notification (one transaction's notifications arrive in order); a
    -- group whose item alone is too long gets an outcomes row instead.
    -- weft.told keeps the told ids until this transaction ends, so
    -- outcomes_of, when it ran this round, answers them "pending" (the
    -- notification is on its way) rather than "unknown".
    IF n_staged > 0 AND array_remove(e_gid, NULL) <> '{}' THEN
        FOR v_item IN
            SELECT y.gid, y.item FROM (
                SELECT x.gid, x.gid || ':' || min(x.seq) || ':'
                              || string_agg(x.ver::text, ',' ORDER BY x.o) FILTER (WHERE x.lead)
                              AS item
                  FROM (SELECT u.gid, u.o, u.st, u.seq, u.ver,
                               row_number() OVER (PARTITION BY u.gid, u.prim ORDER BY u.o) = 1
                               AS lead
                          FROM unnest(e_gid, e_ord, r_status, r_seq, r_ver, e_primary)
                               AS u(gid, o, st, seq, ver, prim)
                         WHERE u.gid IS NOT NULL) x
                 GROUP BY x.gid HAVING bool_and(x.st = 0)) y
             WHERE octet_length(y.item) <= 7000
             ORDER BY y.gid
        LOOP
            IF octet_length(v_msg) + octet_length(v_item.item) > 7000 THEN
                PERFORM pg_notify('__TOLD__', v_msg);
                v_msg := '';
            END IF;
            v_msg := v_msg || CASE WHEN v_msg = '' THEN '' ELSE ' ' END || v_item.item;
            v_told := v_told || v_item.gid;
        END LOOP;
        IF v_msg <> '' THEN
            PERFORM pg_notify('__TOLD__', v_msg);
        END IF;
        PERFORM set_config('weft.told',
            concat_ws(',', nullif(current_setting('weft.told', true), ''),
                      nullif(array_to_string(v_told, ','), '')), true);
    END IF;
    PERFORM pg_notify('__SETTLED__', coalesce(g_id[cardinality(g_id)]::text, '')
        || coalesce('+' || (SELECT min(s.id) FROM "__LOG__".staged s)::text, ''));
    IF n_staged > 0 THEN
        INSERT INTO "__LOG__".outcomes (id, status, seqnum, version, ts, tag, next, numbered_ms)
        SELECT g.id, r_status[g.lo:g.hi], r_seq[g.lo:g.hi], r_ver[g.lo:g.hi],
               r_ts[g.lo:g.hi], r_tag[g.lo:g.hi], r_next[g.lo:g.hi],
               (extract(epoch FROM clock_timestamp()) * 1000)::bigint
          FROM (SELECT u.id, u.len, sum(u.len) OVER (ORDER BY u.o) - u.len + 1 AS lo,
                       sum(u.len) OVER (ORDER BY u.o) AS hi
                  FROM unnest(g_id, g_len) WITH ORDINALITY AS u(id, len, o)) g
         WHERE NOT (g.id = ANY (v_told));
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
    IF EXISTS (SELECT 1 FROM "__LOG__".staged) AND pg_try_advisory_xact_lock(__LOCK_KEY__) THEN
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
