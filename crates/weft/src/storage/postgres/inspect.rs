//! What `weft inspect` and `weft verify` learn about a PostgreSQL log.
//!
//! Both are read-only. Verification scans the whole log in a few
//! statements (each one a full pass over a table): fine for a tool, not
//! for a hot path.

use serde::Serialize;

use super::PgStorage;
use super::errors::Op;
use super::rows::u64_of;
use crate::error::Result;

/// A summary of a PostgreSQL log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PgSummary {
    /// The log's name (its schema).
    pub log: String,
    /// The layout version of its tables.
    pub layout: i32,
    /// The first live seqnum.
    pub first_seqnum: u64,
    /// The seqnum the next entry gets.
    pub next_seqnum: u64,
    /// Primary tags with a version stream.
    pub streams: u64,
    /// Rows in the entries table (live ones plus trimmed rows not yet
    /// deleted).
    pub stored_rows: u64,
    /// Entries carrying an append id.
    pub append_ids: u64,
    /// Keys in the per-view KV.
    pub kv_keys: u64,
}

/// One check of [`PgStorage::verify`]: a name and the SQL counting the
/// rows that break it (0 when the log is sound).
fn checks(s: &str) -> Vec<(&'static str, String)> {
    vec![
        (
            "the trim point is beyond the next seqnum",
            format!("SELECT count(*) FROM {s}.head WHERE first_seqnum > next_seqnum"),
        ),
        (
            "live seqnums are not dense from the trim point to the next seqnum",
            format!(
                "SELECT CASE WHEN count(e.seqnum) = h.next_seqnum - h.first_seqnum \
                   AND coalesce(min(e.seqnum), h.first_seqnum) = h.first_seqnum \
                   AND coalesce(max(e.seqnum), h.next_seqnum - 1) = h.next_seqnum - 1 \
                 THEN 0 ELSE 1 END \
                 FROM {s}.head h LEFT JOIN {s}.entries e ON e.seqnum >= h.first_seqnum \
                 GROUP BY h.first_seqnum, h.next_seqnum"
            ),
        ),
        (
            "entries whose first tag is not their primary tag",
            format!("SELECT count(*) FROM {s}.entries WHERE tags[1] IS DISTINCT FROM primary_tag"),
        ),
        (
            "stream versions that do not go up by one with the seqnum",
            format!(
                "SELECT count(*) FROM (SELECT version - lag(version) OVER \
                   (PARTITION BY primary_tag ORDER BY seqnum) AS step \
                   FROM {s}.entries e, {s}.head h WHERE e.seqnum >= h.first_seqnum) x \
                 WHERE step <> 1"
            ),
        ),
        (
            "streams whose counter is not one past their last entry",
            format!(
                "SELECT count(*) FROM (SELECT primary_tag, max(version) AS last \
                   FROM {s}.entries GROUP BY primary_tag) e \
                 LEFT JOIN {s}.streams st ON st.tag = e.primary_tag \
                 WHERE st.next_version IS DISTINCT FROM e.last + 1"
            ),
        ),
        (
            "secondary tags missing from the tag index",
            format!(
                "SELECT count(*) FROM (SELECT e.seqnum, unnest(e.tags[2:]) AS tag \
                   FROM {s}.entries e) x \
                 WHERE NOT EXISTS (SELECT 1 FROM {s}.entry_tags t \
                   WHERE t.tag = x.tag AND t.seqnum = x.seqnum)"
            ),
        ),
        (
            "tag index rows of live entries that do not carry the tag",
            format!(
                "SELECT count(*) FROM {s}.entry_tags t, {s}.head h \
                 WHERE t.seqnum >= h.first_seqnum AND NOT EXISTS \
                   (SELECT 1 FROM {s}.entries e WHERE e.seqnum = t.seqnum \
                     AND t.tag = ANY (e.tags[2:]))"
            ),
        ),
    ]
}

impl PgStorage {
    /// A summary of the log.
    ///
    /// Errors: `Closed`; connection kinds.
    pub async fn summary(&self) -> Result<PgSummary> {
        let s = format!("\"{}\"", self.shared.schema);
        let sql = format!(
            "SELECT h.layout, h.first_seqnum, h.next_seqnum, \
               (SELECT count(*) FROM {s}.streams), \
               (SELECT count(*) FROM {s}.entries), \
               (SELECT count(*) FROM {s}.entries WHERE append_id IS NOT NULL), \
               (SELECT count(*) FROM {s}.kv) \
             FROM {s}.head h WHERE h.id = 1"
        );
        let rows = self.read_rows("inspect", &sql, &[]).await?;
        let r = rows
            .first()
            .ok_or_else(|| crate::Error::corrupt("the log has no head row"))?;
        Ok(PgSummary {
            log: self.shared.schema.clone(),
            layout: r.get(0),
            first_seqnum: u64_of(r.get(1), "first seqnum")?,
            next_seqnum: u64_of(r.get(2), "next seqnum")?,
            streams: u64_of(r.get(3), "count")?,
            stored_rows: u64_of(r.get(4), "count")?,
            append_ids: u64_of(r.get(5), "count")?,
            kv_keys: u64_of(r.get(6), "count")?,
        })
    }

    /// Checks the log's invariants; returns one line per problem found
    /// (empty: sound).
    ///
    /// Errors: `Closed`; connection kinds.
    pub async fn verify(&self) -> Result<Vec<String>> {
        let s = format!("\"{}\"", self.shared.schema);
        let mut problems = Vec::new();
        for (what, sql) in checks(&s) {
            let sql = format!("SELECT coalesce(({sql}), 0)::bigint");
            let rows = self
                .shared
                .connections
                .query(Op::Read, what, &sql, &[])
                .await?;
            let bad: i64 = rows.first().map(|r| r.get(0)).unwrap_or(0);
            if bad != 0 {
                problems.push(format!("{what} ({bad})"));
            }
        }
        Ok(problems)
    }
}
