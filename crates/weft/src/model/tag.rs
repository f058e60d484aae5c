//! [`LogTag`]: the name of one logical stream.

use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher};
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
/// (a batched append clones each entry's tags several times). Equality
/// and order are those of the parts; the hash is computed once, when the
/// tag is made, because one append looks its tag up in several maps.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct LogTag(Arc<TagParts>);

struct TagParts {
    /// The text form, `namespace` or `namespace:key`: one string, so two
    /// tags compare with one `memcmp` (the namespace has no `:`, so the
    /// text names the parts unambiguously).
    text: Box<str>,
    /// Where the namespace ends in `text` (the key, if any, starts one
    /// byte later).
    namespace_len: usize,
    /// A hash of `namespace` and `key` (a fixed function of them, so equal
    /// parts always have equal hashes); maps mix in their own seeds.
    hash: u64,
}

impl TagParts {
    fn new(namespace: String, key: Option<String>) -> TagParts {
        // Any fixed seed: the value never leaves the process.
        const SEED: u64 = 0x7765_6674_5f74_6167;
        let hash = foldhash::quality::FixedState::with_seed(SEED).hash_one((&namespace, &key));
        let namespace_len = namespace.len();
        let text = match key {
            Some(key) => {
                let mut text = namespace;
                text.reserve_exact(1 + key.len());
                text.push(':');
                text.push_str(&key);
                text
            }
            None => namespace,
        };
        TagParts {
            text: text.into_boxed_str(),
            namespace_len,
            hash,
        }
    }

    fn namespace(&self) -> &str {
        self.text.get(..self.namespace_len).unwrap_or_default()
    }

    fn key(&self) -> Option<&str> {
        self.text.get(self.namespace_len + 1..)
    }
}

impl PartialEq for TagParts {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.text == other.text
    }
}

impl Eq for TagParts {}

impl PartialOrd for TagParts {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for TagParts {
    /// By namespace, then key (a namespace-wide tag first).
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.namespace(), self.key()).cmp(&(other.namespace(), other.key()))
    }
}

impl Hash for LogTag {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.0.hash);
    }
}

impl LogTag {
    /// A namespace-wide tag.
    pub fn new(namespace: impl Into<String>) -> Result<Self> {
        let namespace = checked_namespace(namespace.into())?;
        Ok(LogTag(Arc::new(TagParts::new(namespace, None))))
    }

    /// An instance-scoped tag.
    pub fn with_key(namespace: impl Into<String>, key: impl Into<String>) -> Result<Self> {
        let namespace = checked_namespace(namespace.into())?;
        let key = key.into();
        validate_part("key", &key)?;
        Ok(LogTag(Arc::new(TagParts::new(namespace, Some(key)))))
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        self.0.namespace()
    }

    /// The key, if the tag is instance-scoped.
    pub fn key(&self) -> Option<&str> {
        self.0.key()
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
        f.write_str(&self.0.text)
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

    #[test]
    fn equality_hash_and_order_follow_the_parts() {
        use std::collections::HashSet;
        let hash = |t: &LogTag| foldhash::quality::FixedState::with_seed(1).hash_one(t);
        // Made apart, equal by their parts: equal, with equal hashes.
        let a = LogTag::with_key("orders", "42").unwrap();
        let b: LogTag = "orders:42".parse().unwrap();
        assert!(!Arc::ptr_eq(&a.0, &b.0));
        assert_eq!(a, b);
        assert_eq!(hash(&a), hash(&b));
        // The split between namespace and key is part of the identity.
        let split = [
            LogTag::with_key("ab", "c").unwrap(),
            LogTag::with_key("a", "bc").unwrap(),
            LogTag::new("abc").unwrap(),
            LogTag::new("ab").unwrap(),
        ];
        let set: HashSet<LogTag> = split.iter().cloned().collect();
        assert_eq!(set.len(), split.len());
        assert!(set.contains(&LogTag::with_key("a", "bc").unwrap()));
        // Order: by namespace, then key, a namespace-wide tag first.
        let mut sorted = [
            LogTag::with_key("b", "a").unwrap(),
            LogTag::with_key("a", "z").unwrap(),
            LogTag::new("b").unwrap(),
            LogTag::with_key("a", "b").unwrap(),
            LogTag::new("a").unwrap(),
        ];
        sorted.sort();
        let text: Vec<String> = sorted.iter().map(|t| t.to_string()).collect();
        assert_eq!(text, ["a", "a:b", "a:z", "b", "b:a"]);
        // By the parts, not by the text form (where ':' sorts after '0').
        let mut sorted = [
            LogTag::new("ab0").unwrap(),
            LogTag::with_key("ab", "x").unwrap(),
        ];
        sorted.sort();
        assert_eq!(sorted[0].namespace(), "ab");
        assert_eq!(sorted[0].key(), Some("x"));
        assert_eq!(sorted[1].key(), None);
        // A key may hold ':'; the namespace ends at the first one.
        let colon: LogTag = "a:b:c".parse().unwrap();
        assert_eq!((colon.namespace(), colon.key()), ("a", Some("b:c")));
        assert_eq!(colon, LogTag::with_key("a", "b:c").unwrap());
    }
}
