//! Exit codes, and the one-line error report.
//!
//! A script can tell failures apart by the code alone: each family of
//! [`weft::ErrorKind`] has its own, `1` is reserved for "the command ran and
//! found a problem" (`weft verify`), and `2` is clap's usage error.

use std::io::Write;
use std::process::ExitCode;

use weft::{Error, ErrorKind};

/// `weft verify` found a problem in the data.
pub(crate) const PROBLEM_FOUND: u8 = 1;

/// The table shown at the end of `weft --help`.
pub(crate) const EXIT_CODES_HELP: &str = "\
Exit codes:
  0   success
  1   verify found a problem
  2   usage error (bad arguments)
  3   not found (no such log, object or directory)
  4   invalid input (bad tag, location or data; a position below the trim point)
  5   conflict (--if-version lost; a writer was fenced)
  6   corrupt data (checksum or framing)
  7   locked, read-only (a follower, a read-only filesystem) or permission denied
  8   unsupported by this backend or not built yet
  9   store or disk unavailable (unreachable, full, busy), or the outcome of a write is unknown
  10  internal error, or the log closed
  130 interrupted (SIGINT or SIGTERM; `tail` stops with 0 instead): what a
      writing command was writing may or may not have landed";

/// The exit code for an error of `kind`.
pub(crate) fn code_for(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::NotFound => 3,
        ErrorKind::InvalidInput | ErrorKind::Trimmed => 4,
        ErrorKind::Conflict | ErrorKind::Fenced => 5,
        ErrorKind::Corrupt => 6,
        ErrorKind::Locked | ErrorKind::ReadOnly | ErrorKind::PermissionDenied => 7,
        ErrorKind::Unsupported => 8,
        ErrorKind::Unavailable | ErrorKind::Indeterminate => 9,
        _ => 10,
    }
}

/// The longest a cause may run in the one-line report (an S3 error can
/// carry a whole XML body).
const MAX_CAUSE_CHARS: usize = 240;

/// The error as one line: `<message>[: <cause>: ...] (<kind>)`, with any
/// line breaks inside a cause folded into spaces and long causes cut.
pub(crate) fn one_line(err: &Error) -> String {
    let mut text = err.message().to_owned();
    let mut cause = std::error::Error::source(err);
    while let Some(c) = cause {
        let mut c_text = c.to_string();
        if let Some((cut, _)) = c_text.char_indices().nth(MAX_CAUSE_CHARS) {
            c_text.truncate(cut);
            c_text.push('…');
        }
        // Error::io and friends already put their cause into the message.
        if !text.contains(&c_text) {
            text.push_str(": ");
            text.push_str(&c_text);
        }
        cause = c.source();
    }
    let flat: Vec<&str> = text.split_whitespace().collect();
    format!("{} ({})", flat.join(" "), kind_of(err))
}

/// The kind a command reports for `err`: its own, except that a handle
/// stopped by damaged data (`Closed`, with a `Corrupt` cause) is reported
/// as `Corrupt`. A command never closes its handle while it still uses
/// it, so its `Closed` always has such a cause, and the damage is what
/// the user has to act on (exit 6, as `read` and `verify` judge it).
pub(crate) fn kind_of(err: &Error) -> ErrorKind {
    if err.kind() != ErrorKind::Closed {
        return err.kind();
    }
    let mut cause = std::error::Error::source(err);
    while let Some(c) = cause {
        if let Some(e) = c.downcast_ref::<Error>()
            && e.kind() == ErrorKind::Corrupt
        {
            return ErrorKind::Corrupt;
        }
        cause = c.source();
    }
    err.kind()
}

/// Prints `weft: <error>` on stderr and returns the error's exit code.
pub(crate) fn report(err: &Error) -> ExitCode {
    tracing::debug!(error = ?err, "command failed");
    let _ = writeln!(std::io::stderr(), "weft: {}", one_line(err));
    ExitCode::from(code_for(kind_of(err)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_folds_causes_and_ends_with_the_kind() {
        let io = std::io::Error::other("disk\nfull");
        let err = Error::new(ErrorKind::Closed, "append failed").with_source(io);
        assert_eq!(one_line(&err), "append failed: disk full (closed)");
        let err = Error::io("open x", std::io::Error::from(std::io::ErrorKind::NotFound));
        assert_eq!(one_line(&err).matches("entity not found").count(), 1);
        let long = std::io::Error::other("x".repeat(1000));
        let err = Error::new(ErrorKind::Unavailable, "get").with_source(long);
        assert!(one_line(&err).len() < 300);
    }

    #[test]
    fn a_handle_stopped_by_damage_reports_the_damage() {
        let stopped = Error::corrupt("history page: crc32c mismatch").after_stop("the writer");
        assert_eq!(stopped.kind(), ErrorKind::Closed);
        assert_eq!(kind_of(&stopped), ErrorKind::Corrupt);
        assert!(one_line(&stopped).ends_with("(corrupt)"));
        let other = Error::new(ErrorKind::Unavailable, "down").after_stop("the writer");
        assert_eq!(kind_of(&other), ErrorKind::Closed);
    }

    #[test]
    fn families_have_distinct_codes() {
        assert_eq!(code_for(ErrorKind::NotFound), 3);
        assert_ne!(code_for(ErrorKind::Corrupt), code_for(ErrorKind::Conflict));
        assert_ne!(code_for(ErrorKind::InvalidInput), PROBLEM_FOUND);
    }
}
