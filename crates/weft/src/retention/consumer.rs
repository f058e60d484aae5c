//! Named consumer positions, stored in the log's reserved KV scope.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::consumers_scope;
use crate::error::{Error, ErrorKind, Result};
use crate::kv::ViewKv;
use crate::log::Log;
use crate::model::TagFilter;

/// The longest consumer name, in bytes.
pub const MAX_CONSUMER_NAME_BYTES: usize = 64;

/// The KV key of the list of every consumer key ever committed.
const REGISTRY_KEY: &str = "registry";

/// Checks a consumer name: 1 to [`MAX_CONSUMER_NAME_BYTES`] ASCII letters,
/// digits, `.`, `_` and `-`.
///
/// Errors: `InvalidInput`.
pub fn validate_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= MAX_CONSUMER_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(Error::invalid_input(format!(
            "consumer name {name:?}: use 1 to {MAX_CONSUMER_NAME_BYTES} ASCII letters, digits, '.', '_' or '-'"
        )))
    }
}

/// An unambiguous text of a filter (tags hold no control character, so a
/// newline separates parts), hashed into the consumer's key.
fn canonical(filter: &TagFilter) -> String {
    match filter {
        TagFilter::Tags(tags) => {
            let mut s = String::from("tags");
            for t in tags {
                s.push('\n');
                s.push_str(&t.to_string());
            }
            s
        }
        TagFilter::Namespace(ns) => format!("namespace\n{ns}"),
        TagFilter::KeyPrefix { namespace, prefix } => format!("prefix\n{namespace}\n{prefix}"),
        // `All` is the unfiltered consumer (handled by the caller), and a
        // filter shape added later gets a text of its own.
        other => format!("other\n{other}"),
    }
}

/// 64-bit FNV-1a.
fn fnv64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The stored position of one consumer key (JSON; docs/FORMATS.md).
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoredPosition {
    format: String,
    version: u32,
    name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    filter: Option<String>,
    position: u64,
}

/// The stored registry: every consumer key, sorted.
#[derive(Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct StoredRegistry {
    format: String,
    version: u32,
    keys: Vec<String>,
}

const POSITION_FORMAT: &str = "weft-consumer";
const REGISTRY_FORMAT: &str = "weft-consumers";
const VERSION: u32 = 1;

fn decode_position(key: &str, bytes: &[u8]) -> Result<StoredPosition> {
    let p: StoredPosition = serde_json::from_slice(bytes)
        .map_err(|e| Error::corrupt(format!("consumer position {key:?} is unreadable: {e}")))?;
    if p.format != POSITION_FORMAT || p.version != VERSION {
        return Err(Error::corrupt(format!(
            "consumer position {key:?} is {} version {}; this build reads {POSITION_FORMAT} version {VERSION}",
            p.format, p.version
        )));
    }
    Ok(p)
}

fn decode_registry(bytes: &[u8]) -> Result<StoredRegistry> {
    let r: StoredRegistry = serde_json::from_slice(bytes)
        .map_err(|e| Error::corrupt(format!("the consumer registry is unreadable: {e}")))?;
    if r.format != REGISTRY_FORMAT || r.version != VERSION {
        return Err(Error::corrupt(format!(
            "the consumer registry is {} version {}; this build reads {REGISTRY_FORMAT} version {VERSION}",
            r.format, r.version
        )));
    }
    Ok(r)
}

fn encode<T: Serialize>(value: &T) -> Result<Bytes> {
    serde_json::to_vec(value)
        .map(Bytes::from)
        .map_err(|e| Error::invalid_input(format!("cannot encode a consumer record: {e}")))
}

/// One consumer's committed position, as [`Log::consumers`] lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerPosition {
    /// The consumer's name.
    pub name: String,
    /// The filter it commits under (its display text), `None` for the
    /// whole log.
    pub filter: Option<String>,
    /// The seqnum it resumes at: every entry below it is consumed.
    pub position: u64,
}

/// A durable, named position in a log: where one consumer (optionally for
/// one filter) resumes. Stored with the log, in its KV, so it survives the
/// consumer's restart and any process can read it; a
/// [`RetentionPolicy`](super::RetentionPolicy) can protect it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> weft::Result<()> {
/// use weft::{AppendRequest, Log, LogTag};
///
/// let log = Log::memory();
/// for i in 0..3 {
///     log.append(AppendRequest::new(LogTag::new("orders")?, format!("{i}"))).await?;
/// }
/// let billing = log.consumer("billing")?;
/// assert_eq!(billing.position().await?, None);
/// assert_eq!(billing.commit(2).await?, 2); // seqnums 0 and 1 are done
/// assert_eq!(billing.commit(1).await?, 2); // never moves back
/// assert_eq!(log.consumers().await?[0].position, 2);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Consumer {
    log: Log,
    kv: ViewKv,
    name: String,
    filter: Option<String>,
    key: String,
}

/// The KV key prefix of every key of consumer `name`.
pub(crate) fn key_of(name: &str) -> String {
    format!("consumer/{name}")
}

impl Consumer {
    pub(crate) fn new(log: &Log, name: &str, filter: Option<&TagFilter>) -> Result<Self> {
        validate_name(name)?;
        let kv = log.kv(consumers_scope())?;
        let filter = filter.filter(|f| !matches!(f, TagFilter::All));
        let key = match filter {
            None => key_of(name),
            Some(f) => format!("{}@{:016x}", key_of(name), fnv64(canonical(f).as_bytes())),
        };
        Ok(Consumer {
            log: log.clone(),
            kv,
            name: name.to_owned(),
            filter: filter.map(ToString::to_string),
            key,
        })
    }

    /// The consumer's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The committed position: the seqnum to resume at (every entry below
    /// it is consumed), `None` when nothing was committed yet.
    ///
    /// Errors: `Corrupt` for a stored value that is not a position; the
    /// KV's kinds.
    pub async fn position(&self) -> Result<Option<u64>> {
        match self.kv.get(&self.key).await? {
            None => Ok(None),
            Some(bytes) => Ok(Some(decode_position(&self.key, &bytes)?.position)),
        }
    }

    /// Advances the position to `resume_at` (the seqnum to resume at, as
    /// [`Delivery::resume_at`](crate::Delivery::resume_at) gives it: every
    /// entry below it is consumed) and returns the position now stored.
    /// Positions only move forward: committing a lower one (a redelivery
    /// after a restart) changes nothing and returns the higher one stored.
    ///
    /// Errors: `InvalidInput` when `resume_at` is past the log's end (the
    /// tip's `next`); `Corrupt`; the KV's and the tip query's kinds.
    pub async fn commit(&self, resume_at: u64) -> Result<u64> {
        let tip = self.log.tip().await?;
        if resume_at > tip.next {
            return Err(Error::invalid_input(format!(
                "consumer {:?} cannot commit position {resume_at}: the log ends at {}",
                self.name, tip.next
            )));
        }
        loop {
            let current = self.kv.get(&self.key).await?;
            if let Some(bytes) = &current {
                let stored = decode_position(&self.key, bytes)?.position;
                if stored >= resume_at {
                    return Ok(stored);
                }
            } else {
                self.register().await?;
            }
            let new = encode(&StoredPosition {
                format: POSITION_FORMAT.to_owned(),
                version: VERSION,
                name: self.name.clone(),
                filter: self.filter.clone(),
                position: resume_at,
            })?;
            if self
                .kv
                .compare_and_set(&self.key, current.as_deref(), Some(new))
                .await?
            {
                return Ok(resume_at);
            }
        }
    }

    /// Adds this consumer's key to the registry (once).
    async fn register(&self) -> Result<()> {
        loop {
            let current = self.kv.get(REGISTRY_KEY).await?;
            let mut registry = match &current {
                Some(bytes) => decode_registry(bytes)?,
                None => StoredRegistry {
                    format: REGISTRY_FORMAT.to_owned(),
                    version: VERSION,
                    keys: Vec::new(),
                },
            };
            match registry.keys.binary_search(&self.key) {
                Ok(_) => return Ok(()),
                Err(at) => registry.keys.insert(at, self.key.clone()),
            }
            let new = encode(&registry)?;
            if new.len() > crate::kv::MAX_VALUE_BYTES {
                return Err(Error::invalid_input(
                    "the consumer registry is full: too many consumer keys",
                ));
            }
            if self
                .kv
                .compare_and_set(REGISTRY_KEY, current.as_deref(), Some(new))
                .await?
            {
                return Ok(());
            }
        }
    }
}

/// Every committed consumer position of `log`, sorted by key (name, then
/// filter).
pub(crate) async fn list(log: &Log) -> Result<Vec<ConsumerPosition>> {
    let kv = match log.kv(consumers_scope()) {
        Ok(kv) => kv,
        Err(e) if e.kind() == ErrorKind::Unsupported => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let Some(bytes) = kv.get(REGISTRY_KEY).await? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for key in decode_registry(&bytes)?.keys {
        if let Some(value) = kv.get(&key).await? {
            let p = decode_position(&key, &value)?;
            out.push(ConsumerPosition {
                name: p.name,
                filter: p.filter,
                position: p.position,
            });
        }
    }
    Ok(out)
}

/// The lowest position over every key of consumer `name`: `Some(0)` when
/// it has none (a protected consumer that committed nothing protects the
/// whole log).
pub(crate) async fn protected_position(log: &Log, name: &str) -> Result<u64> {
    let kv = log.kv(consumers_scope())?;
    let Some(bytes) = kv.get(REGISTRY_KEY).await? else {
        return Ok(0);
    };
    let plain = key_of(name);
    let filtered = format!("{plain}@");
    let mut lowest: Option<u64> = None;
    for key in decode_registry(&bytes)?.keys {
        if key != plain && !key.starts_with(&filtered) {
            continue;
        }
        let position = match kv.get(&key).await? {
            Some(value) => decode_position(&key, &value)?.position,
            None => 0,
        };
        lowest = Some(lowest.map_or(position, |l| l.min(position)));
    }
    Ok(lowest.unwrap_or(0))
}
