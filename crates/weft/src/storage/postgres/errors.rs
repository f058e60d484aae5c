//! What a PostgreSQL failure means for the caller, by SQLSTATE code and by
//! where the failure happened — never by message text.
//!
//! The one distinction that matters for writes: did the server answer? An
//! error *response* to a statement means its transaction rolled back
//! (nothing written), so retrying is safe. A connection that closed or
//! timed out after the statement was sent leaves the outcome unknown: the
//! COMMIT may have landed. Those writes are `Indeterminate`; reads are
//! always safe to retry and get `Unavailable`. The full table is in
//! `docs/FAILURE_SEMANTICS.md`.

use std::fmt;

use tokio_postgres::error::SqlState;

use crate::error::{Error, ErrorKind};

/// What kind of operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Op {
    /// Changes nothing: any failure can be retried.
    Read,
    /// May have committed if the answer was lost.
    Write,
}

/// The kind a SQLSTATE code calls for, given what failed.
pub(super) fn kind_of_code(code: &SqlState, op: Op) -> ErrorKind {
    let c = code.code();
    match c {
        // The server rolled the transaction back; the same call may work.
        "40001" | "40P01" | "55P03" | "57014" | "25006" | "57P03" | "53300" => {
            ErrorKind::Unavailable
        }
        // The backend was terminated (shutdown, a crash of a sibling
        // backend) at a point we cannot see: for a write, possibly after
        // its commit record was flushed.
        "57P01" | "57P02" | "57P04" => match op {
            Op::Read => ErrorKind::Unavailable,
            Op::Write => ErrorKind::Indeterminate,
        },
        "42501" => ErrorKind::PermissionDenied,
        // No such database, schema, table or function: the log is not
        // there (or was dropped under us).
        "3D000" | "3F000" | "42P01" | "42883" => ErrorKind::NotFound,
        "XX001" | "XX002" => ErrorKind::Corrupt,
        _ => match &c[..2] {
            // Connection exceptions reported by the server, out of
            // resources (disk full, memory), operator intervention,
            // system errors: the statement did not run to commit.
            "08" | "53" | "57" | "58" => ErrorKind::Unavailable,
            "28" => ErrorKind::PermissionDenied,
            // The values we sent were refused.
            "22" => ErrorKind::InvalidInput,
            // A constraint of the layout failed: the stored log
            // contradicts what this code maintains.
            "23" => ErrorKind::Corrupt,
            _ => ErrorKind::Internal,
        },
    }
}

/// Classifies a failure of the client library.
pub(super) fn classify(err: tokio_postgres::Error, op: Op, context: impl fmt::Display) -> Error {
    let kind = match err.code() {
        Some(code) => kind_of_code(code, op),
        // No error response: the connection broke, timed out or spoke
        // nonsense. A write may have committed.
        None => match op {
            Op::Read => ErrorKind::Unavailable,
            Op::Write => ErrorKind::Indeterminate,
        },
    };
    let message = match err.as_db_error() {
        Some(db) => format!(
            "{context}: {} (SQLSTATE {})",
            db.message(),
            db.code().code()
        ),
        None => format!("{context}: {err}"),
    };
    Error::new(kind, message).with_source(err)
}

/// Classifies a failure to get a connection from the pool: nothing was
/// sent, so nothing was written.
pub(super) fn classify_pool(
    err: deadpool_postgres::PoolError,
    context: impl fmt::Display,
) -> Error {
    use deadpool_postgres::PoolError;
    let kind = match &err {
        PoolError::Backend(e) => match e.code() {
            Some(code) => match kind_of_code(code, Op::Read) {
                // Connecting never writes.
                ErrorKind::Indeterminate => ErrorKind::Unavailable,
                k => k,
            },
            // The TLS handshake failed (a refused certificate, a host
            // name it does not carry): a configuration error, which
            // retrying will not mend. (Only here, when connecting: a TLS
            // failure of an open connection mid-write leaves the outcome
            // unknown like any broken connection.)
            None if super::tls::is_tls_failure(e) => ErrorKind::InvalidInput,
            None => ErrorKind::Unavailable,
        },
        PoolError::Closed => ErrorKind::Closed,
        _ => ErrorKind::Unavailable,
    };
    Error::new(kind, format!("{context}: {err}")).with_source(err)
}

/// The error of an operation that did not finish within its deadline.
pub(super) fn timed_out(op: Op, context: impl fmt::Display, after: std::time::Duration) -> Error {
    let kind = match op {
        Op::Read => ErrorKind::Unavailable,
        Op::Write => ErrorKind::Indeterminate,
    };
    Error::new(
        kind,
        format!("{context}: no answer from PostgreSQL within {after:?}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_map_by_class_and_operation() {
        let cases = [
            (
                SqlState::T_R_SERIALIZATION_FAILURE,
                Op::Write,
                ErrorKind::Unavailable,
            ),
            (SqlState::QUERY_CANCELED, Op::Write, ErrorKind::Unavailable),
            (
                SqlState::ADMIN_SHUTDOWN,
                Op::Write,
                ErrorKind::Indeterminate,
            ),
            (SqlState::ADMIN_SHUTDOWN, Op::Read, ErrorKind::Unavailable),
            (
                SqlState::CRASH_SHUTDOWN,
                Op::Write,
                ErrorKind::Indeterminate,
            ),
            (SqlState::DISK_FULL, Op::Write, ErrorKind::Unavailable),
            (
                SqlState::INVALID_PASSWORD,
                Op::Read,
                ErrorKind::PermissionDenied,
            ),
            (
                SqlState::INSUFFICIENT_PRIVILEGE,
                Op::Write,
                ErrorKind::PermissionDenied,
            ),
            (SqlState::UNDEFINED_TABLE, Op::Read, ErrorKind::NotFound),
            (SqlState::UNIQUE_VIOLATION, Op::Write, ErrorKind::Corrupt),
            (SqlState::DATA_CORRUPTED, Op::Read, ErrorKind::Corrupt),
            (
                SqlState::CHARACTER_NOT_IN_REPERTOIRE,
                Op::Write,
                ErrorKind::InvalidInput,
            ),
            (SqlState::SYNTAX_ERROR, Op::Read, ErrorKind::Internal),
            (
                SqlState::CONNECTION_FAILURE,
                Op::Read,
                ErrorKind::Unavailable,
            ),
            (
                SqlState::READ_ONLY_SQL_TRANSACTION,
                Op::Write,
                ErrorKind::Unavailable,
            ),
        ];
        for (code, op, kind) in cases {
            assert_eq!(kind_of_code(&code, op), kind, "{} {op:?}", code.code());
        }
    }
}
