//! The condition a conditional append puts on its stream.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};

/// What a conditional append expects of its primary tag's stream before it
/// writes.
///
/// A stream's state is its *next version*: 0 while no entry with that
/// primary tag was ever written, otherwise the latest version plus one. A
/// trim does not reset it (version numbering continues after a trim), so a
/// stream whose entries were all trimmed away still **exists** for these
/// conditions: [`Expected::NoStream`] fails on it and
/// [`Expected::StreamExists`] holds. `NoStream` therefore means "never had
/// an entry", which is what an idempotent "create" needs.
///
/// A plain `u64` converts into [`Expected::Exact`], so callers that pass a
/// version keep compiling:
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> weft::Result<()> {
/// use weft::{AppendRequest, Expected, Log, LogTag};
///
/// let log = Log::memory();
/// let cart = LogTag::new("cart")?;
/// log.append_if(AppendRequest::new(cart.clone(), "opened"), Expected::NoStream).await?;
/// // A second "create" of the same stream is refused.
/// let again = log.append_if(AppendRequest::new(cart.clone(), "opened"), Expected::NoStream).await;
/// assert_eq!(again.unwrap_err().conflict_next_version(), Some(1));
/// log.append_if(AppendRequest::new(cart.clone(), "item"), Expected::StreamExists).await?;
/// log.append_if(AppendRequest::new(cart.clone(), "paid"), 2).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Expected {
    /// No condition: the append always writes (as an unconditional one).
    Any,
    /// The stream never had an entry (its next version is 0).
    NoStream,
    /// The stream has had at least one entry (trimmed or not).
    StreamExists,
    /// The stream's next version is exactly this (0 for a stream that
    /// never had an entry, so `Exact(0)` and `NoStream` admit the same
    /// states).
    Exact(u64),
}

impl Expected {
    /// True when a stream whose next version is `next` satisfies the
    /// condition.
    pub fn admits(self, next: u64) -> bool {
        match self {
            Expected::Any => true,
            Expected::NoStream => next == 0,
            Expected::StreamExists => next > 0,
            Expected::Exact(v) => v == next,
        }
    }

    /// `Ok` when the stream of `tag`, at next version `next`, satisfies the
    /// condition; otherwise the `Conflict` error an append reports.
    ///
    /// Errors: `Conflict`, with
    /// [`ErrorDetail::VersionConflict`](crate::ErrorDetail::VersionConflict)
    /// for [`Expected::Exact`] and
    /// [`ErrorDetail::StreamStateConflict`](crate::ErrorDetail::StreamStateConflict)
    /// for the states; both carry `next`
    /// ([`Error::conflict_next_version`]).
    pub fn check(self, tag: impl fmt::Display, next: u64) -> Result<()> {
        if self.admits(next) {
            return Ok(());
        }
        Err(match self {
            Expected::Exact(v) => Error::version_conflict(tag, v, next),
            state => Error::stream_state_conflict(tag, state, next),
        })
    }
}

impl From<u64> for Expected {
    fn from(version: u64) -> Self {
        Expected::Exact(version)
    }
}

impl fmt::Display for Expected {
    /// The spelling [`FromStr`] reads: `any`, `no-stream`, `stream-exists`
    /// or the version number.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expected::Any => f.write_str("any"),
            Expected::NoStream => f.write_str("no-stream"),
            Expected::StreamExists => f.write_str("stream-exists"),
            Expected::Exact(v) => write!(f, "{v}"),
        }
    }
}

impl FromStr for Expected {
    type Err = Error;

    /// Reads `any`, `no-stream`, `stream-exists` (also with `_` for `-`)
    /// or a version number.
    ///
    /// Errors: `InvalidInput` for anything else.
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "any" => Ok(Expected::Any),
            "no-stream" => Ok(Expected::NoStream),
            "stream-exists" | "exists" => Ok(Expected::StreamExists),
            v => v.parse::<u64>().map(Expected::Exact).map_err(|_| {
                Error::invalid_input(format!(
                    "expected version {s:?}: give a version number, `any`, `no-stream` or `stream-exists`"
                ))
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ErrorDetail, ErrorKind};

    #[test]
    fn every_state_against_fresh_and_written_streams() {
        // (condition, admits next=0, admits next=1, admits next=5)
        let table = [
            (Expected::Any, true, true, true),
            (Expected::NoStream, true, false, false),
            (Expected::StreamExists, false, true, true),
            (Expected::Exact(0), true, false, false),
            (Expected::Exact(1), false, true, false),
            (Expected::Exact(5), false, false, true),
        ];
        for (e, at0, at1, at5) in table {
            assert_eq!(
                [e.admits(0), e.admits(1), e.admits(5)],
                [at0, at1, at5],
                "{e}"
            );
            for next in [0, 1, 5] {
                match e.check("t", next) {
                    Ok(()) => assert!(e.admits(next)),
                    Err(err) => {
                        assert_eq!(err.kind(), ErrorKind::Conflict);
                        assert_eq!(err.conflict_next_version(), Some(next));
                        let detail_ok = match (e, err.detail()) {
                            (
                                Expected::Exact(v),
                                Some(ErrorDetail::VersionConflict { expected, .. }),
                            ) => *expected == v,
                            (s, Some(ErrorDetail::StreamStateConflict { expected, .. })) => {
                                *expected == s
                            }
                            _ => false,
                        };
                        assert!(detail_ok, "{e} at {next}: {:?}", err.detail());
                    }
                }
            }
        }
    }

    #[test]
    fn spellings_round_trip_and_bad_ones_are_invalid_input() {
        for e in [
            Expected::Any,
            Expected::NoStream,
            Expected::StreamExists,
            Expected::Exact(7),
        ] {
            assert_eq!(e.to_string().parse::<Expected>().unwrap(), e);
        }
        assert_eq!("NO_STREAM".parse::<Expected>().unwrap(), Expected::NoStream);
        for bad in ["", "-1", "maybe", "1.5"] {
            assert_eq!(
                bad.parse::<Expected>().unwrap_err().kind(),
                ErrorKind::InvalidInput
            );
        }
    }
}
