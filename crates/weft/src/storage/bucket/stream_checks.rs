//! What a writer that opened from a state checkpoint checks before it
//! numbers a stream.
//!
//! A checkpoint (`states/`) is derived state: a forged or stale one (valid
//! checksums, a stream's version moved) would make the writer append at
//! the wrong version. The background history fill compares the whole
//! checkpoint with the log once it reaches it, but that takes time in the
//! log's length, and appends are taken before. So until the fill is over,
//! a stream is checked against the log the first time the writer numbers
//! it (or answers its latest version), at a cost that does not grow with
//! the log:
//!
//! * a stream with entries after the checkpoint: its version comes from
//!   those entries, read at open, and the first of them must carry the
//!   version the checkpoint gives the stream (checked at open, for free);
//! * a stream the checkpoint names with the seqnum of its last entry (a
//!   version 2 checkpoint): that one entry is read and must carry the
//!   stream as its primary tag and the version before the checkpoint's
//!   (one read per stream, once). An entry since trimmed away is checked
//!   against the trim state's version instead;
//! * a stream the checkpoint does not name (new, as far as it says), and
//!   every stream of a version 1 checkpoint (no last seqnums): the append
//!   waits for the history fill, whose comparison then covers it — the
//!   only bounded way to know a stream has *no* entry is to have read the
//!   history. Appends to streams that are checked go on meanwhile.
//!
//! Before any of that, the checkpoint as a whole must account for every
//! entry it covers: each entry adds one to its primary stream's version,
//! so the next versions of all streams (trimmed ones included) add up to
//! `through + 1`. A checkpoint with one stream moved ahead or behind, left
//! out or added fails this at once, whichever stream is appended to.
//!
//! A mismatch is `Corrupt` and stops the writer before it writes anything
//! numbered from the checkpoint. What these checks cannot show: a
//! checkpoint forged so that the sum still holds and a stream names an
//! *older* entry of its own with that entry's version (the stream looks
//! shorter than it is, and another stream longer). Appends to the first
//! stream before the fill reaches the checkpoint take its versions; the
//! fill's comparison then stops the writer, and `weft verify` reports the
//! checkpoint.

use std::collections::{HashMap, HashSet};

use super::local::LocalLog;
use super::numbers::Floors;
use crate::error::{Error, Result};
use crate::format::StateCheckpoint;
use crate::format::state_checkpoint::TRIMMED;
use crate::model::LogTag;

/// The streams still to be checked, and how.
#[derive(Debug)]
pub(crate) struct StreamChecks {
    /// The seqnum the checkpoint covers.
    through: u64,
    /// Every stream's next version as of the checkpoint.
    floors: Floors,
    /// The seqnum of each stream's last entry as of the checkpoint (empty
    /// for a version 1 checkpoint).
    last: HashMap<LogTag, u64>,
    /// Each stream's next version in the log's trim state (streams whose
    /// entries were trimmed away).
    trimmed: HashMap<LogTag, u64>,
    /// Streams checked, or known from entries after the checkpoint.
    checked: std::sync::Mutex<HashSet<LogTag>>,
    /// Why the checkpoint as a whole cannot be right, if it cannot.
    unsound: Option<Error>,
}

impl StreamChecks {
    /// The checks for a writer that opened from `checkpoint`, whose
    /// versions are `floors`; `live` are the streams with entries after
    /// it, each with the version of the first of them; `trim_floors` the
    /// versions of the log's trim state.
    pub(crate) fn new(
        checkpoint: &StateCheckpoint,
        floors: Floors,
        live: Vec<(LogTag, u64)>,
        trim_floors: &[(LogTag, u64)],
    ) -> Self {
        let last = match &checkpoint.last_seqnums {
            Some(last) => checkpoint
                .state
                .next_versions
                .iter()
                .zip(last)
                .map(|((tag, _), s)| (tag.clone(), *s))
                .collect(),
            None => HashMap::new(),
        };
        let through = checkpoint.state.through;
        let total: u128 = checkpoint
            .state
            .next_versions
            .iter()
            .map(|(_, v)| u128::from(*v))
            .sum();
        let mut unsound = (total != u128::from(through) + 1).then(|| {
            Error::corrupt(format!(
                "the state checkpoint through {through} this writer opened from accounts for \
                 {total} entries, the log has {} up to it",
                u128::from(through) + 1
            ))
        });
        if unsound.is_none()
            && let Some((tag, first)) = live
                .iter()
                .find(|(tag, first)| floors.get(tag).copied().unwrap_or(0) != *first)
        {
            unsound = Some(Error::corrupt(format!(
                "the state checkpoint through {through} this writer opened from says stream \
                 {tag} continues at version {}, the entry after it has version {first}",
                floors.get(tag).copied().unwrap_or(0)
            )));
        }
        StreamChecks {
            through,
            unsound,
            floors,
            last,
            trimmed: trim_floors.iter().cloned().collect(),
            checked: std::sync::Mutex::new(live.into_iter().map(|(t, _)| t).collect()),
        }
    }

    fn is_checked(&self, tag: &LogTag) -> bool {
        self.checked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(tag)
    }

    /// Checks every stream of `tags` the writer has not checked yet
    /// against the log (see the module docs); at once when the history
    /// fill is over (it compared the whole checkpoint).
    ///
    /// Errors: `Corrupt` when the checkpoint disagrees with the log (the
    /// caller stops the writer); the fill's error; store kinds reading an
    /// entry (nothing is decided, the next append checks again).
    pub(crate) async fn before_numbering<'a>(
        &self,
        tags: impl IntoIterator<Item = &'a LogTag>,
        log: &LocalLog,
    ) -> Result<()> {
        for tag in tags {
            if !log.visible().read().filling_in() {
                return Ok(());
            }
            if let Some(e) = &self.unsound {
                return Err(e.clone());
            }
            if self.is_checked(tag) {
                continue;
            }
            match (self.floors.get(tag), self.last.get(tag)) {
                (Some(next), Some(last)) => self.check_one(tag, *next, *last, log).await?,
                // Nothing to check it by: the fill's comparison decides.
                _ => return log.filled_in().await,
            }
            self.checked
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(tag.clone());
        }
        Ok(())
    }

    /// Checks that stream `tag`, which the checkpoint says continues at
    /// `next` after its entry `last`, does.
    async fn check_one(&self, tag: &LogTag, next: u64, last: u64, log: &LocalLog) -> Result<()> {
        let wrong = |found: String| {
            Error::corrupt(format!(
                "the state checkpoint through {} this writer opened from says stream {tag} \
                 continues at version {next} after entry {}; {found}",
                self.through,
                if last == TRIMMED {
                    "(trimmed)".to_string()
                } else {
                    last.to_string()
                }
            ))
        };
        if next == 0 {
            return Err(wrong("a stream in it has at least one entry".into()));
        }
        let first = log.visible().read().tip().first;
        if last == TRIMMED || last < first {
            return match self.trimmed.get(tag) {
                Some(v) if *v == next => Ok(()),
                Some(v) => Err(wrong(format!("the log's trim state says {v}"))),
                None => Err(wrong(
                    "the log's trim state does not name the stream".into(),
                )),
            };
        }
        if last > self.through {
            return Err(wrong("that entry lies past the checkpoint".into()));
        }
        let entry = log
            .reader()
            .read_seqnums(&[last])
            .await?
            .pop()
            .ok_or_else(|| Error::corrupt(format!("entry {last} of the log cannot be read")))?;
        if entry.primary_tag() != tag {
            return Err(wrong(format!(
                "that entry belongs to stream {}",
                entry.primary_tag()
            )));
        }
        if entry.stream_version + 1 != next {
            return Err(wrong(format!(
                "that entry has version {}",
                entry.stream_version
            )));
        }
        Ok(())
    }
}
