//! [`LogTag`]: the name of one logical stream.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::error::{Error, Result};

/// The longest namespace or key, in bytes (both are stored with a `u16`
/// length, but names this long are already a mistake).
pub const MAX_TAG_PART_BYTES: usize = 255;

/// Identifies a logical stream: a namespace (the entity type) and an
/// optional key (the entity instance).
///
/// `orders` names every order; `orders:order-42` names one. The text form
/// splits at the first `:`, so a namespace can never contain `:` while a key
/// may. Both parts must be non-empty, at most [`MAX_TAG_PART_BYTES`] bytes
/// and free of control characters.
///
/// ```
/// use weft::LogTag;
///
/// let all = LogTag::new("orders")?;
/// let one = LogTag::with_key("orders", "order-42")?;
/// assert_eq!(one.to_string(), "orders:order-42");
/// assert_eq!("orders:order-42".parse::<LogTag>()?, one);
/// assert!(LogTag::new("").is_err());
/// # Ok::<(), weft::Error>(())
/// ```
///
/// A tag is shared, not copied: every entry, index key and append result
/// of a stream holds the same parts, so cloning one is a reference count
/// (a batched append clones each entry's tags several times). Equality,
/// hashing and order are those of the parts.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LogTag(Arc<TagParts>);

#[derive(PartialEq, Eq, Hash, PartialOrd, Ord)]
struct TagParts {
    namespace: String,
    key: Option<String>,
}

impl LogTag {
    /// A namespace-wide tag.
    pub fn new(namespace: impl Into<String>) -> Result<Self> {
        let namespace = checked_namespace(namespace.into())?;
        Ok(LogTag(Arc::new(TagParts {
            namespace,
            key: None,
        })))
    }

    /// An instance-scoped tag.
    pub fn with_key(namespace: impl Into<String>, key: impl Into<String>) -> Result<Self> {
        let namespace = checked_namespace(namespace.into())?;
        let key = key.into();
        validate_part("key", &key)?;
        Ok(LogTag(Arc::new(TagParts {
            namespace,
            key: Some(key),
        })))
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        &self.0.namespace
    }

    /// The key, if the tag is instance-scoped.
    pub fn key(&self) -> Option<&str> {
        self.0.key.as_deref()
    }
}

fn checked_namespace(namespace: String) -> Result<String> {
    validate_part("namespace", &namespace)?;
    if namespace.contains(':') {
        return Err(Error::invalid_input(format!(
            "tag namespace {namespace:?} contains ':', which separates namespace from key"
        )));
    }
    Ok(namespace)
}

fn validate_part(what: &str, s: &str) -> Result<()> {
    if s.is_empty() {
        return Err(Error::invalid_input(format!("tag {what} is empty")));
    }
    if s.len() > MAX_TAG_PART_BYTES {
        return Err(Error::invalid_input(format!(
            "tag {what} is {} bytes; the limit is {MAX_TAG_PART_BYTES}",
            s.len()
        )));
    }
    if s.chars().any(char::is_control) {
        return Err(Error::invalid_input(format!(
            "tag {what} {s:?} contains a control character"
        )));
    }
    Ok(())
}

impl FromStr for LogTag {
    type Err = Error;

    /// Parses `ns` or `ns:key` (the first `:` splits).
    fn from_str(s: &str) -> Result<Self> {
        match s.split_once(':') {
            Some((ns, key)) => LogTag::with_key(ns, key),
            None => LogTag::new(s),
        }
    }
}

impl fmt::Display for LogTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.key() {
            Some(key) => write!(f, "{}:{}", self.namespace(), key),
            None => f.write_str(self.namespace()),
        }
    }
}

impl fmt::Debug for LogTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LogTag({self})")
    }
}

impl serde::Serialize for LogTag {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for LogTag {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn rejects_bad_names() {
        for bad in ["", "a\nb", "a:b"] {
            assert_eq!(
                LogTag::new(bad).unwrap_err().kind(),
                ErrorKind::InvalidInput,
                "{bad:?}"
            );
        }
        assert!(LogTag::new("x".repeat(MAX_TAG_PART_BYTES)).is_ok());
        assert!(LogTag::new("x".repeat(MAX_TAG_PART_BYTES + 1)).is_err());
        assert!(LogTag::with_key("orders", "").is_err());
        assert!(LogTag::with_key("orders", "a\u{0}").is_err());
    }

    #[test]
    fn text_form_round_trips() {
        let tag: LogTag = "orders:a:b".parse().unwrap();
        assert_eq!(tag.namespace(), "orders");
        assert_eq!(tag.key(), Some("a:b"));
        assert_eq!(tag.to_string().parse::<LogTag>().unwrap(), tag);
    }
}
