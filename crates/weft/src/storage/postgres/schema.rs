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
//! * `numbered` (layout 1 called it `entries`; `entries` is now a view of
//!   it joined with `payloads`, with layout 1's columns, which every read
//!   uses) — one row per entry, keyed by seqnum, with a unique
//!   `(primary_tag, version)` index for version reads, a `(primary_tag,
//!   seqnum)` index for tag reads, and a partial unique index on the
//!   optional append id (exactly-once appends).
//! * `entry_tags` — one row per *secondary* tag of an entry, keyed by
//!   `(tag, seqnum)`, so a tag read covers entries where it is not primary.
//!   An entry of a group staged by `append_group` has no `data` here but a
//!   reference `(group_id, ord)` to its `payloads` row.
//! * `payloads` — the payloads of groups staged by `append_group`, one row
//!   per entry, written by the appender's own transaction; rounds never
//!   read or copy them (layout 2).
//! * `staged` — append groups waiting for a round: one row per group, its
//!   entries as arrays (layout 2: without the payloads when
//!   `payload_bytes` is set).
//! * `outcomes` — what a round decided for each staged group (per entry:
//!   status, seqnum, version, ...), until its appender collects it.
//! * `kv` — the per-view KV: `(scope, key) -> value`.
//!
//! Functions (one call each, so no lock is held across a round trip; their
//! text is in `layout/functions.sql`, the tables' in `layout/tables.sql`
//! and `layout/layout2.sql`):
//!
//! * `append_group(...)` — as `append` below, but a group it stages has
//!   its payloads written into `payloads` (layout 2); its outcome is told
//!   on the told channel by the round that numbers it, when every entry
//!   was written (otherwise it gets an `outcomes` row as below).
//! * `condition_holds(expected, next)` — the one place a condition is
//!   decided.
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
pub(super) const LAYOUT_VERSION: i32 = 2;

/// The layout version before payloads were written by their appenders:
/// such a log is upgraded in place at open (or, when this role may not,
/// used as it is).
pub(super) const LAYOUT_STAGED_COPIES: i32 = 1;

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

/// The channel on which numbering rounds tell the appenders of groups
/// staged by `append_group` their outcomes (`collect.rs` reads the
/// payload).
pub(super) fn told_channel(schema: &str) -> String {
    format!("weft_told_{schema}")
}

/// The SQL expression of the log's numbering lock: a transaction-scoped
/// advisory lock keyed by "weft" and the OID of the log's `head` table, so
/// two logs never share it.
fn lock_key(schema: &str) -> String {
    format!(r#"(2003134068::bigint << 32) | ('"{schema}".head'::regclass::oid::bigint)"#)
}

/// The statements that create a log's tables as layout version 1 drew
/// them (`layout/tables.sql`); [`upgrade_to_2`] follows them at once.
const TABLES_SQL: &str = include_str!("layout/tables.sql");

/// Layout 1 -> 2 (`layout/layout2.sql`).
const LAYOUT2_SQL: &str = include_str!("layout/layout2.sql");

/// The log's functions (`layout/functions.sql`; `CREATE OR REPLACE`:
/// installing them again, on a log created by an older build, upgrades
/// them in place).
const FUNCTIONS_SQL: &str = include_str!("layout/functions.sql");

/// The revision of `layout/functions.sql` (its `functions_revision()`): a
/// log whose functions are older gets these at open.
const FUNCTIONS_REVISION: i32 = 2;

/// `sql` for the log in `schema`: the files name the schema, the lock key
/// and the channels with placeholders.
fn fill(sql: &str, schema: &str) -> String {
    sql.replace("__LOCK_KEY__", &lock_key(schema))
        .replace("__CHANNEL__", &channel(schema))
        .replace("__SETTLED__", &settled_channel(schema))
        .replace("__TOLD__", &told_channel(schema))
        .replace("__ROUND_MAX_GROUPS__", &ROUND_MAX_GROUPS.to_string())
        .replace("__ROUND_MAX_BYTES__", &ROUND_MAX_BYTES.to_string())
        .replace("__FUNCTIONS_REVISION__", &FUNCTIONS_REVISION.to_string())
        .replace("__LOG__", schema)
}

fn tables(schema: &str) -> String {
    fill(TABLES_SQL, schema)
}

fn upgrade_to_2(schema: &str) -> String {
    fill(LAYOUT2_SQL, schema)
}

fn functions(schema: &str) -> String {
    fill(FUNCTIONS_SQL, schema)
}

/// What the log's installed functions offer this build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Installed {
    /// `outcomes_of` and the settled channel are there: staged groups'
    /// outcomes are collected per handle, one call per round. False for a
    /// log created by an older build whose functions this role may not
    /// replace: then each staged group asks `outcome_of` itself.
    pub(super) bulk_outcomes: bool,
    /// The log is of the current layout and has `append_group`: staged
    /// groups' payloads go to `payloads` and are never copied. False for
    /// a log of layout 1 this role may not upgrade: then this handle
    /// stages through `append` and trims `entries`, as layout 1 did.
    pub(super) payloads: bool,
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
/// body. A settled notification of revision 2 (`+` and the oldest staged
/// id) is unreadable to an older build's collector, which then asks for
/// all its waiting groups, as it does after any round it cannot read.
/// When the role may not replace the functions (it does not own them),
/// the log keeps them and this handle uses the older path (with
/// revision-1 functions, a bare `+` makes every waiter ask).
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
                    count(*) FILTER (WHERE p.proname = 'round_ids'), \
                    count(*) FILTER (WHERE p.proname = 'append_group'), \
                    count(*) FILTER (WHERE p.proname = 'functions_revision') \
             FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n \
             ON n.oid = p.pronamespace WHERE n.nspname = $1",
            &[&schema],
        )
        .await
        .map_err(|e| errors::classify(e, op, "look for the log's schema"))?;
    let (existing, bulk, bounded, grouped, revised) = (
        present.get::<_, i64>(0) > 0,
        present.get::<_, i64>(1) > 0,
        present.get::<_, i64>(2) > 0,
        present.get::<_, i64>(3) > 0,
        present.get::<_, i64>(4) > 0,
    );
    let revision: i32 = if revised {
        tx.query_one(&format!(r#"SELECT "{schema}".functions_revision()"#), &[])
            .await
            .map_err(|e| errors::classify(e, op, "read the log's functions revision"))?
            .get(0)
    } else {
        1
    };
    if !existing && !create {
        return Err(Error::new(
            crate::ErrorKind::NotFound,
            format!("no log {schema:?} in this database"),
        ));
    }
    let mut installed = Installed {
        bulk_outcomes: true,
        payloads: true,
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
        // Three messages, so each part has the whole statement timeout.
        for sql in [tables(schema), upgrade_to_2(schema), functions(schema)] {
            tx.batch_execute(&sql).await.map_err(|e| {
                errors::classify(e, op, format!("create the log schema {schema:?}"))
            })?;
        }
    }
    let layout: i32 = tx
        .query_one(
            &format!(r#"SELECT layout FROM "{schema}".head WHERE id = 1"#),
            &[],
        )
        .await
        .map_err(|e| errors::classify(e, op, "read the log's head"))?
        .get(0);
    // A log this call created has this build's functions already (what was
    // looked up above predates it): installing them again would be work for
    // nothing on every new log.
    let stale = !(bulk && bounded && grouped) || revision < FUNCTIONS_REVISION;
    let upgrade = match layout {
        LAYOUT_STAGED_COPIES => Some(format!("{}{}", upgrade_to_2(schema), functions(schema))),
        LAYOUT_VERSION if existing && stale => Some(functions(schema)),
        LAYOUT_VERSION => None,
        _ => {
            return Err(Error::corrupt(format!(
                "the log in schema {schema:?} has layout version {layout}; this weft reads \
                 {LAYOUT_STAGED_COPIES} and {LAYOUT_VERSION}"
            )));
        }
    };
    if let Some(sql) = upgrade {
        // A log of an older build: upgrade its layout and functions, in a
        // savepoint so a refusal (a role that does not own them) leaves
        // the install transaction usable and the log as it was.
        let upgrade = tx
            .transaction()
            .await
            .map_err(|e| errors::classify(e, op, "begin the log's upgrade"))?;
        match upgrade.batch_execute(&sql).await {
            Ok(()) => upgrade
                .commit()
                .await
                .map_err(|e| errors::classify(e, op, "upgrade the log"))?,
            Err(e) => {
                tracing::debug!(error = %e, schema, layout, "the log stays as an older build made it");
                upgrade
                    .rollback()
                    .await
                    .map_err(|e| errors::classify(e, op, "roll back the log's upgrade"))?;
                installed.bulk_outcomes = bulk;
                installed.payloads = layout == LAYOUT_VERSION && grouped;
            }
        }
    }
    tx.commit()
        .await
        .map_err(|e| errors::classify(e, op, "commit the schema install"))?;
    Ok(installed)
}
