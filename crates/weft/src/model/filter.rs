//! Which entries a filtered whole-log subscription delivers.

use std::fmt;

use crate::error::{Error, Result};

use super::{LogEntry, LogTag};

/// A set of entries described by their tags, for
/// [`Log::subscribe_filtered`](crate::Log::subscribe_filtered).
///
/// An entry matches when **any** of its tags (primary or secondary)
/// matches. The tag rules (`namespace` or `namespace:key`, see [`LogTag`])
/// give the three shapes:
///
/// ```
/// use weft::{LogTag, TagFilter};
///
/// let eu = TagFilter::key_prefix("orders", "eu-")?;
/// assert!(eu.matches_tag(&"orders:eu-17".parse()?));
/// assert!(!eu.matches_tag(&"orders:us-3".parse()?));
/// assert!(!eu.matches_tag(&"orders".parse()?), "a namespace-wide tag has no key");
///
/// let orders = TagFilter::namespace("orders")?;
/// assert!(orders.matches_tag(&"orders".parse()?) && orders.matches_tag(&"orders:us-3".parse()?));
///
/// let some = TagFilter::tags(["audit".parse::<LogTag>()?, "user:7".parse()?])?;
/// assert!(some.matches_tag(&"user:7".parse()?) && !some.matches_tag(&"user:8".parse()?));
/// # Ok::<(), weft::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TagFilter {
    /// Every entry.
    All,
    /// Entries carrying any of these tags (at least one).
    Tags(Vec<LogTag>),
    /// Entries carrying a tag of this namespace, with or without a key.
    Namespace(String),
    /// Entries carrying a tag of `namespace` whose key starts with
    /// `prefix` (an empty prefix: any keyed tag of the namespace).
    KeyPrefix {
        /// The namespace.
        namespace: String,
        /// What the key starts with.
        prefix: String,
    },
}

impl TagFilter {
    /// Entries carrying any of `tags`.
    ///
    /// Errors: `InvalidInput` for an empty set.
    pub fn tags(tags: impl IntoIterator<Item = LogTag>) -> Result<Self> {
        let mut tags: Vec<LogTag> = tags.into_iter().collect();
        tags.sort();
        tags.dedup();
        if tags.is_empty() {
            return Err(Error::invalid_input("a tag filter needs at least one tag"));
        }
        Ok(TagFilter::Tags(tags))
    }

    /// Entries carrying a tag of `namespace`.
    ///
    /// Errors: `InvalidInput` when `namespace` is not a valid namespace.
    pub fn namespace(namespace: impl Into<String>) -> Result<Self> {
        let tag = LogTag::new(namespace)?;
        Ok(TagFilter::Namespace(tag.namespace().to_owned()))
    }

    /// Entries carrying a tag of `namespace` whose key starts with `prefix`.
    ///
    /// Errors: `InvalidInput` when `namespace` is not a valid namespace or
    /// `prefix` could be no key's start (a control character, too long).
    pub fn key_prefix(namespace: impl Into<String>, prefix: impl Into<String>) -> Result<Self> {
        let namespace = LogTag::new(namespace)?.namespace().to_owned();
        let prefix = prefix.into();
        if !prefix.is_empty() {
            // A prefix no valid key can start with would match nothing,
            // silently: refuse it the way the key itself would be refused.
            LogTag::with_key(namespace.clone(), prefix.clone())?;
        }
        Ok(TagFilter::KeyPrefix { namespace, prefix })
    }

    /// Reads the CLI's spelling of a key prefix: `ns:prefix` (`ns:` for
    /// any keyed tag of `ns`).
    ///
    /// Errors: `InvalidInput` without a `:`, or as [`TagFilter::key_prefix`].
    pub fn parse_key_prefix(s: &str) -> Result<Self> {
        let (ns, prefix) = s.split_once(':').ok_or_else(|| {
            Error::invalid_input(format!(
                "key prefix {s:?}: write it as namespace:prefix (for example orders:eu-)"
            ))
        })?;
        TagFilter::key_prefix(ns, prefix)
    }

    /// True when `tag` matches.
    pub fn matches_tag(&self, tag: &LogTag) -> bool {
        match self {
            TagFilter::All => true,
            TagFilter::Tags(tags) => tags.binary_search(tag).is_ok(),
            TagFilter::Namespace(ns) => tag.namespace() == ns,
            TagFilter::KeyPrefix { namespace, prefix } => {
                tag.namespace() == namespace && tag.key().is_some_and(|k| k.starts_with(prefix))
            }
        }
    }

    /// True when some tag of `entry` matches.
    pub fn matches(&self, entry: &LogEntry) -> bool {
        matches!(self, TagFilter::All) || entry.tags.iter().any(|t| self.matches_tag(t))
    }

    /// The one tag whose entries are exactly this filter's, when there is
    /// one: storage then reads that tag's entries from its index instead
    /// of every entry.
    pub(crate) fn single_tag(&self) -> Option<&LogTag> {
        match self {
            TagFilter::Tags(tags) if tags.len() == 1 => tags.first(),
            _ => None,
        }
    }
}

impl From<LogTag> for TagFilter {
    fn from(tag: LogTag) -> Self {
        TagFilter::Tags(vec![tag])
    }
}

impl fmt::Display for TagFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TagFilter::All => f.write_str("every entry"),
            TagFilter::Tags(tags) => {
                let names: Vec<String> = tags.iter().map(ToString::to_string).collect();
                write!(f, "tags {}", names.join(", "))
            }
            TagFilter::Namespace(ns) => write!(f, "namespace {ns}"),
            TagFilter::KeyPrefix { namespace, prefix } => write!(f, "keys {namespace}:{prefix}*"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    fn t(s: &str) -> LogTag {
        s.parse().unwrap()
    }

    #[test]
    fn every_shape_against_every_kind_of_tag() {
        let tags = [
            "orders",
            "orders:eu-1",
            "orders:us-1",
            "ordersx:eu-1",
            "audit",
        ];
        // (filter, which of `tags` match)
        let table = [
            (TagFilter::All, [true, true, true, true, true]),
            (
                TagFilter::namespace("orders").unwrap(),
                [true, true, true, false, false],
            ),
            (
                TagFilter::key_prefix("orders", "eu-").unwrap(),
                [false, true, false, false, false],
            ),
            (
                TagFilter::key_prefix("orders", "").unwrap(),
                [false, true, true, false, false],
            ),
            (
                TagFilter::tags([t("audit"), t("orders:us-1")]).unwrap(),
                [false, false, true, false, true],
            ),
        ];
        for (filter, want) in table {
            let got: Vec<bool> = tags.iter().map(|s| filter.matches_tag(&t(s))).collect();
            assert_eq!(got, want, "{filter}");
        }
    }

    #[test]
    fn bad_filters_are_invalid_input() {
        let bad = [
            TagFilter::tags([]).map(|_| ()),
            TagFilter::namespace("").map(|_| ()),
            TagFilter::namespace("a:b").map(|_| ()),
            TagFilter::key_prefix("a:b", "x").map(|_| ()),
            TagFilter::key_prefix("a", "\u{7}").map(|_| ()),
            TagFilter::parse_key_prefix("no-colon").map(|_| ()),
        ];
        for r in bad {
            assert_eq!(r.unwrap_err().kind(), ErrorKind::InvalidInput);
        }
        assert_eq!(
            TagFilter::parse_key_prefix("orders:eu-").unwrap(),
            TagFilter::key_prefix("orders", "eu-").unwrap()
        );
    }
}
