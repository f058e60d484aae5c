//! The error body of every non-2xx answer, and the one map between an
//! error's kind and its HTTP status.
//!
//! ```json
//! {"error": {"kind": "conflict", "message": "...", "retry_after_ms": null,
//!            "detail": {"version_conflict": {"expected": 3, "next": 5}}}}
//! ```
//!
//! The kind is [`weft::ErrorKind::as_str`]; a client rebuilds the same
//! [`weft::Error`] (kind and detail) from the body, so code written
//! against the embedded log handles a remote one's errors unchanged.

use serde::{Deserialize, Serialize};
use weft::{Error, ErrorDetail, ErrorKind};

/// Every error kind, in the order of the table in `docs/SERVER.md`.
pub const KINDS: [ErrorKind; 14] = [
    ErrorKind::InvalidInput,
    ErrorKind::PermissionDenied,
    ErrorKind::NotFound,
    ErrorKind::Conflict,
    ErrorKind::Fenced,
    ErrorKind::Trimmed,
    ErrorKind::Locked,
    ErrorKind::ReadOnly,
    ErrorKind::Corrupt,
    ErrorKind::Internal,
    ErrorKind::Unsupported,
    ErrorKind::Closed,
    ErrorKind::Unavailable,
    ErrorKind::Indeterminate,
];

/// The HTTP status an error of `kind` is answered with.
///
/// One status per kind; `corrupt` and `internal` share 500 (both are the
/// server's fault and neither is retried), and the body always names the
/// kind. A request without a valid token is 401 with kind
/// `permission_denied` (see `docs/SERVER.md`); a wrong scope is 403.
pub fn status_of(kind: ErrorKind) -> u16 {
    match kind {
        ErrorKind::InvalidInput => 400,
        ErrorKind::PermissionDenied => 403,
        ErrorKind::NotFound => 404,
        ErrorKind::Conflict => 409,
        ErrorKind::Fenced => 410,
        ErrorKind::Trimmed => 416,
        ErrorKind::Locked => 423,
        ErrorKind::ReadOnly => 421,
        ErrorKind::Corrupt | ErrorKind::Internal => 500,
        ErrorKind::Unsupported => 501,
        ErrorKind::Closed => 502,
        ErrorKind::Unavailable => 503,
        ErrorKind::Indeterminate => 504,
        // ErrorKind is non-exhaustive: a kind added to weft later is a
        // server error until it is given its own status here.
        _ => 500,
    }
}

/// The kind named `name` ([`ErrorKind::as_str`]); `Internal` for a name
/// this build does not know (a newer server).
pub fn kind_named(name: &str) -> ErrorKind {
    KINDS
        .into_iter()
        .find(|k| k.as_str() == name)
        .unwrap_or(ErrorKind::Internal)
}

/// The kind a status stands for when an answer has no error body (a
/// proxy's answer, a body cut short).
pub fn kind_of_status(status: u16) -> ErrorKind {
    match status {
        401 | 403 => ErrorKind::PermissionDenied,
        404 => ErrorKind::NotFound,
        408 | 429 | 503 => ErrorKind::Unavailable,
        504 => ErrorKind::Indeterminate,
        400..=499 => ErrorKind::InvalidInput,
        _ => ErrorKind::Unavailable,
    }
}

/// The body of every non-2xx answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// The error.
    pub error: Fault,
}

/// One error, as the API reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fault {
    /// [`ErrorKind::as_str`] of the kind.
    pub kind: String,
    /// For humans; never match on it.
    pub message: String,
    /// When set, retry after this many milliseconds (also in `Retry-After`).
    #[serde(default)]
    pub retry_after_ms: Option<u64>,
    /// Structured facts, as [`weft::ErrorDetail`] has them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<Detail>,
}

/// [`weft::ErrorDetail`] on the wire.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Detail {
    /// A conditional append found the stream elsewhere.
    VersionConflict {
        /// The version the append expected.
        expected: u64,
        /// The stream's next version now.
        next: u64,
    },
    /// A conditional append's state condition failed.
    StreamStateConflict {
        /// The condition, as on the wire (`"no_stream"`, `"stream_exists"`,
        /// `"any"`).
        expected: crate::expected::StreamState,
        /// The stream's next version now (0: it never had an entry).
        next: u64,
    },
    /// A read below the trim point.
    Trimmed {
        /// The position asked for.
        requested: u64,
        /// The first readable position.
        first_available: u64,
    },
    /// A payload a typed view could not decode.
    Decode {
        /// The entry's seqnum.
        seqnum: u64,
    },
    /// The server's writer was fenced.
    Fenced {
        /// Its epoch.
        ours: u64,
        /// The newer epoch.
        theirs: u64,
    },
}

impl ErrorBody {
    /// The body for `err`, with an optional retry hint.
    pub fn of(err: &Error, retry_after_ms: Option<u64>) -> Self {
        let detail = err.detail().and_then(|d| match *d {
            ErrorDetail::VersionConflict { expected, next } => {
                Some(Detail::VersionConflict { expected, next })
            }
            ErrorDetail::StreamStateConflict { expected, next } => {
                match crate::expected::ExpectedWire::from(expected) {
                    crate::expected::ExpectedWire::State(state) => {
                        Some(Detail::StreamStateConflict {
                            expected: state,
                            next,
                        })
                    }
                    crate::expected::ExpectedWire::Version(v) => {
                        Some(Detail::VersionConflict { expected: v, next })
                    }
                }
            }
            ErrorDetail::Trimmed {
                requested,
                first_available,
            } => Some(Detail::Trimmed {
                requested,
                first_available,
            }),
            ErrorDetail::Decode { seqnum } => Some(Detail::Decode { seqnum }),
            ErrorDetail::Fenced { ours, theirs } => Some(Detail::Fenced { ours, theirs }),
            _ => None,
        });
        // The message and its causes; the kind has its own field.
        let mut message = err.message().to_owned();
        let mut cause = std::error::Error::source(err);
        while let Some(c) = cause {
            message.push_str(": ");
            message.push_str(&c.to_string());
            cause = c.source();
        }
        ErrorBody {
            error: Fault {
                kind: err.kind().as_str().to_owned(),
                message,
                retry_after_ms,
                detail,
            },
        }
    }

    /// The [`weft::Error`] this body describes (kind, message and detail).
    pub fn into_error(self) -> Error {
        let Fault {
            kind,
            message,
            detail,
            ..
        } = self.error;
        let err = Error::new(kind_named(&kind), message);
        match detail {
            Some(Detail::VersionConflict { expected, next }) => {
                err.with_detail(ErrorDetail::VersionConflict { expected, next })
            }
            Some(Detail::StreamStateConflict { expected, next }) => {
                err.with_detail(ErrorDetail::StreamStateConflict {
                    expected: crate::expected::ExpectedWire::State(expected).into(),
                    next,
                })
            }
            Some(Detail::Trimmed {
                requested,
                first_available,
            }) => err.with_detail(ErrorDetail::Trimmed {
                requested,
                first_available,
            }),
            Some(Detail::Decode { seqnum }) => err.with_detail(ErrorDetail::Decode { seqnum }),
            Some(Detail::Fenced { ours, theirs }) => {
                err.with_detail(ErrorDetail::Fenced { ours, theirs })
            }
            None => err,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_through_its_name() {
        for kind in KINDS {
            assert_eq!(kind_named(kind.as_str()), kind);
        }
        assert_eq!(kind_named("from_the_future"), ErrorKind::Internal);
    }

    #[test]
    fn statuses_are_errors_and_only_corrupt_and_internal_share_one() {
        let mut seen = std::collections::HashMap::new();
        for kind in KINDS {
            let status = status_of(kind);
            assert!((400..600).contains(&status), "{kind}");
            if let Some(other) = seen.insert(status, kind) {
                let pair = [other, kind];
                assert!(
                    pair.contains(&ErrorKind::Corrupt) && pair.contains(&ErrorKind::Internal),
                    "{other} and {kind} share {status}"
                );
            }
        }
    }

    #[test]
    fn bodies_keep_kind_and_detail() {
        let err = Error::version_conflict("orders", 3, 5);
        let json = serde_json::to_string(&ErrorBody::of(&err, None)).unwrap();
        let back: ErrorBody = serde_json::from_str(&json).unwrap();
        let again = back.into_error();
        assert_eq!(again.kind(), ErrorKind::Conflict);
        assert_eq!(again.conflict_next_version(), Some(5));
        let trimmed = ErrorBody::of(&Error::trimmed(2, 5), Some(7)).into_error();
        assert_eq!(trimmed.detail(), Error::trimmed(2, 5).detail());
    }
}
