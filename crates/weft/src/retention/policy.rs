//! [`RetentionPolicy`] and its stored form.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::consumer::validate_name;
use crate::error::{Error, Result};

/// How much of a log to keep: any combination of an age, a count and a
/// size limit, and the consumers whose unread entries are kept whatever
/// the limits say.
///
/// An entry is dropped when any limit says so: it is older than `max_age_ms`
/// (by its [`timestamp_ms`](crate::LogEntry::timestamp_ms) against the
/// applying writer's clock), or more than `max_count` newer entries exist,
/// or the payload bytes of the entries from it to the end exceed
/// `max_bytes`. Nothing at or after a protected consumer's position is
/// dropped. A policy with no limit keeps everything.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct RetentionPolicy {
    /// Drop entries older than this many milliseconds.
    pub max_age_ms: Option<u64>,
    /// Keep at most this many entries (the newest).
    pub max_count: Option<u64>,
    /// Keep at most this many payload bytes (the newest entries').
    pub max_bytes: Option<u64>,
    /// Named consumers ([`Consumer`](super::Consumer)) whose position
    /// retention never passes: an entry is dropped only once every
    /// protected consumer (under every filter it commits with) has
    /// committed a position past it. A protected name that has committed
    /// nothing yet protects the whole log.
    pub protect_consumers: Vec<String>,
}

setters! {
    RetentionPolicy {
        with_max_age_ms => max_age_ms: Option<u64>,
        with_max_count => max_count: Option<u64>,
        with_max_bytes => max_bytes: Option<u64>,
        with_protect_consumers => protect_consumers: Vec<String>,
    }
}

/// The stored form: JSON, one object (see docs/FORMATS.md).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Stored {
    format: String,
    version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_age_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    protect_consumers: Vec<String>,
}

const FORMAT: &str = "weft-retention";
const VERSION: u32 = 1;

impl RetentionPolicy {
    /// True when the policy has no limit (it keeps everything).
    pub fn keeps_everything(&self) -> bool {
        self.max_age_ms.is_none() && self.max_count.is_none() && self.max_bytes.is_none()
    }

    /// Checks the policy: every limit is at least 1 and every protected
    /// consumer name is valid and named once.
    ///
    /// Errors: `InvalidInput`.
    pub fn validate(&self) -> Result<()> {
        for (what, limit) in [
            ("max_age_ms", self.max_age_ms),
            ("max_count", self.max_count),
            ("max_bytes", self.max_bytes),
        ] {
            if limit == Some(0) {
                return Err(Error::invalid_input(format!(
                    "retention {what} must be at least 1 (leave it unset for no limit)"
                )));
            }
        }
        for (i, name) in self.protect_consumers.iter().enumerate() {
            validate_name(name)?;
            if self.protect_consumers[..i].contains(name) {
                return Err(Error::invalid_input(format!(
                    "consumer {name:?} is protected twice"
                )));
            }
        }
        Ok(())
    }

    /// The stored bytes of the policy.
    ///
    /// Errors: `InvalidInput` when the policy does not
    /// [`validate`](RetentionPolicy::validate).
    pub fn encode(&self) -> Result<Bytes> {
        self.validate()?;
        let stored = Stored {
            format: FORMAT.to_owned(),
            version: VERSION,
            max_age_ms: self.max_age_ms,
            max_count: self.max_count,
            max_bytes: self.max_bytes,
            protect_consumers: self.protect_consumers.clone(),
        };
        serde_json::to_vec(&stored)
            .map(Bytes::from)
            .map_err(|e| Error::invalid_input(format!("cannot encode the retention policy: {e}")))
    }

    /// A policy from its stored bytes.
    ///
    /// Errors: `Corrupt` for bytes that are not a valid policy of a known
    /// version.
    pub fn decode(bytes: &[u8]) -> Result<Self> {
        let stored: Stored = serde_json::from_slice(bytes).map_err(|e| {
            Error::corrupt(format!("the stored retention policy is unreadable: {e}"))
        })?;
        if stored.format != FORMAT || stored.version != VERSION {
            return Err(Error::corrupt(format!(
                "the stored retention policy is {} version {}; this build reads {FORMAT} version {VERSION}",
                stored.format, stored.version
            )));
        }
        let policy = RetentionPolicy {
            max_age_ms: stored.max_age_ms,
            max_count: stored.max_count,
            max_bytes: stored.max_bytes,
            protect_consumers: stored.protect_consumers,
        };
        policy
            .validate()
            .map_err(|e| Error::corrupt(format!("the stored retention policy is invalid: {e}")))?;
        Ok(policy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn policies_round_trip_and_bad_bytes_are_corrupt() {
        let full = RetentionPolicy {
            max_age_ms: Some(7 * 86_400_000),
            max_count: Some(10),
            max_bytes: Some(1 << 30),
            protect_consumers: vec!["billing".into(), "search-indexer".into()],
        };
        for p in [RetentionPolicy::default(), full] {
            assert_eq!(RetentionPolicy::decode(&p.encode().unwrap()).unwrap(), p);
        }
        assert_eq!(
            &RetentionPolicy {
                max_count: Some(3),
                ..Default::default()
            }
            .encode()
            .unwrap()[..],
            br#"{"format":"weft-retention","version":1,"max_count":3}"#
        );
        for bad in [
            &b"nope"[..],
            br#"{"format":"weft-retention","version":2}"#,
            br#"{"format":"other","version":1}"#,
            br#"{"format":"weft-retention","version":1,"max_count":0}"#,
            br#"{"format":"weft-retention","version":1,"surprise":1}"#,
            br#"{"format":"weft-retention","version":1,"protect_consumers":["a b"]}"#,
        ] {
            assert_eq!(
                RetentionPolicy::decode(bad).unwrap_err().kind(),
                ErrorKind::Corrupt
            );
        }
        let twice = RetentionPolicy {
            protect_consumers: vec!["a".into(), "a".into()],
            ..Default::default()
        };
        assert_eq!(twice.encode().unwrap_err().kind(), ErrorKind::InvalidInput);
    }
}
