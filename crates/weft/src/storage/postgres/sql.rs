//! The statements one log runs, with its schema filled in.
//!
//! Every read is one statement, so it sees one snapshot: the head row (the
//! trim point) and the entries are read together, and a read can never
//! pair a trim point with entries from another moment. Entries below the
//! trim point may still exist (they are deleted after the trim point
//! moves, outside the head lock); every read filters them out.

/// The statement texts of the log in one schema.
#[derive(Debug)]
pub(super) struct Statements {
    /// Layout 1's append (payloads staged inline, copied by the round).
    pub(super) append: String,
    /// The current layout's append: a staged group's payloads are written
    /// once, into `payloads`.
    pub(super) append_group: String,
    /// `$1` a staged group's id: its outcome rows.
    pub(super) outcome_of: String,
    /// `$1` staged groups' ids: `id, ` then their outcome rows.
    pub(super) outcomes_of: String,
    /// `$1` how long uncollected outcomes stay: `first, next`.
    pub(super) sweep: String,
    pub(super) trim: String,
    /// `$1` the first live seqnum, `$2` at most this many: deletes the
    /// rows below, payloads included (the current layout).
    pub(super) delete_trimmed: String,
    /// As `delete_trimmed`, for a log of layout 1.
    pub(super) delete_trimmed_v1: String,
    /// `$1` seqnums (bigint[]): empties the live ones' payloads, returns
    /// how many had one (the current layout: the payload is the row's
    /// `data` for entries numbered before layout 2, else its `payloads`
    /// row's).
    pub(super) erase: String,
    /// As `erase`, for a log of layout 1.
    pub(super) erase_v1: String,
    /// `$1` from, `$2` limit: `first, next, entries...`.
    pub(super) read_all: String,
    /// `$1` tag, `$2` from, `$3` limit: `first, entries...`.
    pub(super) read_tag: String,
    /// `$1` tag, `$2` from version, `$3` limit:
    /// `first_live_version, next_version, entries...`.
    pub(super) read_versions: String,
    /// `$1` before: `first, entry`.
    pub(super) prev_all: String,
    /// `$1` tag, `$2` before: `first, entry`.
    pub(super) prev_tag: String,
    pub(super) tip: String,
    pub(super) next_version: String,
    /// `$1` the first tag (text, or null), `$2` limit:
    /// `tag, next_version, entries` in the storage seam's stream order.
    pub(super) streams: String,
    pub(super) kv_get: String,
    pub(super) kv_upsert: String,
    pub(super) kv_delete: String,
    pub(super) kv_insert_new: String,
    pub(super) kv_replace: String,
    pub(super) kv_delete_if: String,
    pub(super) kv_absent: String,
}

const ENTRY_COLUMNS: &str = "e.seqnum, e.version, e.tags, e.data, e.ts, e.append_id";

impl Statements {
    pub(super) fn new(schema: &str) -> Self {
        let s = format!("\"{schema}\"");
        Statements {
            append: format!("SELECT * FROM {s}.append($1, $2, $3, $4, $5, $6, $7)"),
            append_group: format!("SELECT * FROM {s}.append_group($1, $2, $3, $4, $5, $6, $7)"),
            outcome_of: format!("SELECT * FROM {s}.outcome_of($1)"),
            outcomes_of: format!("SELECT * FROM {s}.outcomes_of($1)"),
            sweep: format!("SELECT * FROM {s}.sweep($1)"),
            trim: format!("SELECT * FROM {s}.trim($1)"),
            delete_trimmed: format!(
                "WITH d AS (DELETE FROM {s}.numbered WHERE seqnum IN ( \
                    SELECT x.seqnum FROM {s}.numbered x WHERE x.seqnum < $1 \
                    ORDER BY x.seqnum LIMIT $2) RETURNING seqnum, tags, group_id, ord), \
                 t AS (DELETE FROM {s}.entry_tags et \
                   USING (SELECT d.seqnum, unnest(d.tags[2:]) AS tag FROM d) x \
                   WHERE et.tag = x.tag AND et.seqnum = x.seqnum RETURNING 1), \
                 p AS (DELETE FROM {s}.payloads pl USING d \
                   WHERE pl.group_id = d.group_id AND pl.ord = d.ord RETURNING 1) \
                 SELECT (SELECT count(*) FROM d), (SELECT count(*) FROM t), \
                        (SELECT count(*) FROM p)"
            ),
            delete_trimmed_v1: format!(
                "WITH d AS (DELETE FROM {s}.entries WHERE seqnum IN ( \
                    SELECT x.seqnum FROM {s}.entries x WHERE x.seqnum < $1 \
                    ORDER BY x.seqnum LIMIT $2) RETURNING seqnum, tags), \
                 t AS (DELETE FROM {s}.entry_tags et \
                   USING (SELECT d.seqnum, unnest(d.tags[2:]) AS tag FROM d) x \
                   WHERE et.tag = x.tag AND et.seqnum = x.seqnum RETURNING 1) \
                 SELECT (SELECT count(*) FROM d), (SELECT count(*) FROM t)"
            ),
            erase: format!(
                "WITH d AS (SELECT n.seqnum, n.group_id, n.ord, n.data FROM {s}.numbered n \
                    JOIN {s}.head h ON h.id = 1 \
                    WHERE n.seqnum = ANY($1) AND n.seqnum >= h.first_seqnum), \
                 a AS (UPDATE {s}.numbered n SET data = ''::bytea FROM d \
                   WHERE n.seqnum = d.seqnum AND length(d.data) > 0 RETURNING 1), \
                 b AS (UPDATE {s}.payloads p SET data = ''::bytea FROM d \
                   WHERE d.data IS NULL AND p.group_id = d.group_id AND p.ord = d.ord \
                     AND length(p.data) > 0 RETURNING 1) \
                 SELECT (SELECT count(*) FROM a) + (SELECT count(*) FROM b)"
            ),
            erase_v1: format!(
                "WITH a AS (UPDATE {s}.entries e SET data = ''::bytea FROM {s}.head h \
                   WHERE h.id = 1 AND e.seqnum = ANY($1) AND e.seqnum >= h.first_seqnum \
                     AND length(e.data) > 0 RETURNING 1) \
                 SELECT count(*) FROM a"
            ),
            read_all: format!(
                "SELECT h.first_seqnum, h.next_seqnum, {ENTRY_COLUMNS} FROM {s}.head h \
                 LEFT JOIN LATERAL (SELECT * FROM {s}.entries e \
                    WHERE e.seqnum >= greatest($1, h.first_seqnum) \
                    ORDER BY e.seqnum LIMIT $2) e ON true \
                 WHERE h.id = 1 ORDER BY e.seqnum"
            ),
            read_tag: format!(
                "SELECT h.first_seqnum, {ENTRY_COLUMNS} FROM {s}.head h \
                 LEFT JOIN LATERAL (SELECT * FROM {s}.entries e WHERE e.seqnum IN ( \
                    (SELECT p.seqnum FROM {s}.entries p \
                      WHERE p.primary_tag = $1 AND p.seqnum >= greatest($2, h.first_seqnum) \
                      ORDER BY p.seqnum LIMIT $3) \
                    UNION ALL \
                    (SELECT t.seqnum FROM {s}.entry_tags t \
                      WHERE t.tag = $1 AND t.seqnum >= greatest($2, h.first_seqnum) \
                      ORDER BY t.seqnum LIMIT $3)) \
                    ORDER BY e.seqnum LIMIT $3) e ON true \
                 WHERE h.id = 1 ORDER BY e.seqnum"
            ),
            read_versions: format!(
                "SELECT (SELECT f.version FROM {s}.entries f \
                          WHERE f.primary_tag = $1 AND f.seqnum >= h.first_seqnum \
                          ORDER BY f.seqnum LIMIT 1), \
                        (SELECT st.next_version FROM {s}.streams st WHERE st.tag = $1), \
                        {ENTRY_COLUMNS} FROM {s}.head h \
                 LEFT JOIN LATERAL (SELECT * FROM {s}.entries e \
                    WHERE e.primary_tag = $1 AND e.version >= $2 \
                      AND e.seqnum >= h.first_seqnum \
                    ORDER BY e.version LIMIT $3) e ON true \
                 WHERE h.id = 1 ORDER BY e.version"
            ),
            prev_all: format!(
                "SELECT h.first_seqnum, {ENTRY_COLUMNS} FROM {s}.head h \
                 LEFT JOIN LATERAL (SELECT * FROM {s}.entries e \
                    WHERE e.seqnum < $1 AND e.seqnum >= h.first_seqnum \
                    ORDER BY e.seqnum DESC LIMIT 1) e ON true WHERE h.id = 1"
            ),
            prev_tag: format!(
                "SELECT h.first_seqnum, {ENTRY_COLUMNS} FROM {s}.head h \
                 LEFT JOIN LATERAL (SELECT * FROM {s}.entries e WHERE e.seqnum = ( \
                    SELECT max(x.seqnum) FROM ( \
                      (SELECT p.seqnum FROM {s}.entries p \
                        WHERE p.primary_tag = $1 AND p.seqnum < $2 \
                        ORDER BY p.seqnum DESC LIMIT 1) \
                      UNION ALL \
                      (SELECT t.seqnum FROM {s}.entry_tags t \
                        WHERE t.tag = $1 AND t.seqnum < $2 \
                        ORDER BY t.seqnum DESC LIMIT 1)) x) \
                    AND e.seqnum >= h.first_seqnum) e ON true WHERE h.id = 1"
            ),
            tip: format!("SELECT first_seqnum, next_seqnum FROM {s}.head WHERE id = 1"),
            next_version: format!("SELECT next_version FROM {s}.streams WHERE tag = $1"),
            // Every tag that was a primary tag (streams) or that a live
            // entry carries as a secondary one (entry_tags above the trim
            // point), in the seam's order: namespace length, namespace
            // bytes, then the whole tag's length and bytes (for one
            // namespace, the key's). "C" collation: byte order.
            streams: format!(
                "WITH h AS (SELECT first_seqnum AS f FROM {s}.head WHERE id = 1),                  t AS (SELECT st.tag FROM {s}.streams st WHERE st.next_version > 0                        UNION                        SELECT DISTINCT et.tag FROM {s}.entry_tags et, h WHERE et.seqnum >= h.f),                  o AS (SELECT t.tag, split_part(t.tag, ':', 1) AS ns FROM t),                  p AS (SELECT o.tag, o.ns FROM o                        WHERE $1::text IS NULL                           OR (octet_length(o.ns), o.ns COLLATE \"C\",                               octet_length(o.tag), o.tag COLLATE \"C\")                           >= (octet_length(split_part($1::text, ':', 1)),                               split_part($1::text, ':', 1) COLLATE \"C\",                               octet_length($1::text), $1::text COLLATE \"C\")                        ORDER BY octet_length(o.ns), o.ns COLLATE \"C\",                                 octet_length(o.tag), o.tag COLLATE \"C\"                        LIMIT $2)                  SELECT p.tag,                         COALESCE((SELECT st.next_version FROM {s}.streams st                                    WHERE st.tag = p.tag), 0),                         (SELECT count(*) FROM {s}.entries e, h                           WHERE e.primary_tag = p.tag AND e.seqnum >= h.f)                         + (SELECT count(*) FROM {s}.entry_tags et, h                           WHERE et.tag = p.tag AND et.seqnum >= h.f)                  FROM p                  ORDER BY octet_length(p.ns), p.ns COLLATE \"C\",                           octet_length(p.tag), p.tag COLLATE \"C\""
            ),
            kv_get: format!("SELECT value FROM {s}.kv WHERE scope = $1 AND key = $2"),
            kv_upsert: format!(
                "INSERT INTO {s}.kv (scope, key, value) VALUES ($1, $2, $3) \
                 ON CONFLICT (scope, key) DO UPDATE SET value = excluded.value RETURNING 1"
            ),
            kv_delete: format!("DELETE FROM {s}.kv WHERE scope = $1 AND key = $2 RETURNING 1"),
            kv_insert_new: format!(
                "INSERT INTO {s}.kv (scope, key, value) VALUES ($1, $2, $3) \
                 ON CONFLICT (scope, key) DO NOTHING RETURNING 1"
            ),
            kv_replace: format!(
                "UPDATE {s}.kv SET value = $3 WHERE scope = $1 AND key = $2 AND value = $4 \
                 RETURNING 1"
            ),
            kv_delete_if: format!(
                "DELETE FROM {s}.kv WHERE scope = $1 AND key = $2 AND value = $3 RETURNING 1"
            ),
            kv_absent: format!(
                "SELECT NOT EXISTS (SELECT 1 FROM {s}.kv WHERE scope = $1 AND key = $2)"
            ),
        }
    }
}
