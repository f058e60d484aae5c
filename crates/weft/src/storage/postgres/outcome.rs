//! The outcome protocol between an appender and the numbering rounds:
//! what the `append` functions and `outcome_of`/`outcomes_of` answer (the
//! status codes and an outcome row), what an appender keeps of its staged
//! group to read a told outcome, and how long it waits before it asks.
//! Shared by the appender (`writer`) and the collector of staged groups'
//! outcomes (`collect`), so neither reaches into the other.

use std::time::Duration;

use crate::error::{Error, Result};

/// The `append` function's answer when it staged the group: its id.
pub(super) const STATUS_STAGED: i16 = 4;
/// `outcome_of`'s answer for a group neither staged nor numbered.
pub(super) const STATUS_UNKNOWN: i16 = 5;
/// `outcome_of`'s answer while another process's round runs.
pub(super) const STATUS_PENDING: i16 = 6;
/// The `append` function's answer when an append id of the group is in a
/// group still staged: nothing was staged.
pub(super) const STATUS_ID_PENDING: i16 = 7;

/// How long a staged group waits for a round that settles it before its
/// handle asks anyway.
pub(super) const PENDING_RECHECK: Duration = Duration::from_millis(50);

/// One row of the `append` function's answer.
pub(super) struct Outcome {
    pub(super) status: i16,
    pub(super) seqnum: Option<i64>,
    pub(super) version: Option<i64>,
    pub(super) ts: Option<i64>,
    pub(super) tag: Option<String>,
    pub(super) next: Option<i64>,
}

impl Outcome {
    /// An entry written with these numbers.
    pub(super) fn written(seqnum: i64, version: i64, ts: i64) -> Outcome {
        Outcome {
            status: 0,
            seqnum: Some(seqnum),
            version: Some(version),
            ts: Some(ts),
            tag: None,
            next: None,
        }
    }

    /// The outcome in `row`'s columns from `first` on (status, seqnum,
    /// version, ts, tag, next).
    pub(super) fn from_row(row: &tokio_postgres::Row, first: usize) -> Outcome {
        Outcome {
            status: row.get(first),
            seqnum: row.get(first + 1),
            version: row.get(first + 2),
            ts: row.get(first + 3),
            tag: row.get(first + 4),
            next: row.get(first + 5),
        }
    }
}

/// What an appender knows of its staged group, to read its outcome from
/// a told item: each entry's primary tag, and the group's timestamp.
pub(super) struct Shape {
    pub(super) primary: Vec<String>,
    pub(super) ts: i64,
}

impl Shape {
    /// Every entry's outcome from a told item: the group's entries got
    /// `first`, `first + 1`, ... in order, and `versions` holds, per
    /// primary tag in the order the tags first appear in the group, the
    /// version of its first entry there.
    pub(super) fn outcomes(&self, first: i64, versions: &[i64]) -> Result<Vec<Outcome>> {
        let mut tags: Vec<(&str, i64)> = Vec::new();
        let mut out = Vec::with_capacity(self.primary.len());
        for (i, tag) in self.primary.iter().enumerate() {
            let version = match tags.iter_mut().find(|(t, _)| *t == tag.as_str()) {
                Some((_, next)) => {
                    *next += 1;
                    *next
                }
                None => {
                    let v = *versions.get(tags.len()).ok_or_else(|| {
                        Error::internal("a told outcome names fewer streams than the group has")
                    })?;
                    tags.push((tag, v));
                    v
                }
            };
            out.push(Outcome::written(first + i as i64, version, self.ts));
        }
        if tags.len() != versions.len() {
            return Err(Error::internal(
                "a told outcome names more streams than the group has",
            ));
        }
        Ok(out)
    }
}
