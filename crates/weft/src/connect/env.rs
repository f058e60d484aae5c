//! Reading settings from environment variables, through a lookup function
//! so that callers and tests need not touch the process environment.

// Only the clouds' settings read variables; a build without them keeps the
// module for `StoreSettings::from_env`.
#![cfg_attr(not(any(feature = "aws", feature = "azure")), allow(dead_code))]

use crate::error::{Error, Result};

/// Looks variables up by name; an empty value counts as unset.
pub(crate) struct Env<F> {
    lookup: F,
}

impl<F: Fn(&str) -> Option<String>> Env<F> {
    pub(crate) fn new(lookup: F) -> Self {
        Env { lookup }
    }

    /// The value of `key`, unless unset or empty.
    pub(crate) fn get(&self, key: &str) -> Option<String> {
        (self.lookup)(key).filter(|v| !v.is_empty())
    }

    /// The value of the first of `keys` that is set.
    pub(crate) fn first(&self, keys: &[&str]) -> Option<String> {
        keys.iter().find_map(|k| self.get(k))
    }

    /// A boolean variable (`1/0`, `true/false`, `yes/no`, `on/off`, any
    /// case); unset is `false`.
    ///
    /// Errors: [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput)
    /// for any other value.
    pub(crate) fn flag(&self, key: &str) -> Result<bool> {
        match self.get(key) {
            None => Ok(false),
            Some(v) => parse_bool(&v)
                .ok_or_else(|| Error::invalid_input(format!("{key}={v:?} is not true/false"))),
        }
    }
}

/// The process environment (variables that are not valid Unicode count as
/// unset).
pub(crate) fn process(key: &str) -> Option<String> {
    std::env::var(key).ok()
}

fn parse_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn empty_is_unset_and_flags_are_strict() {
        let env = Env::new(|k: &str| match k {
            "EMPTY" => Some(String::new()),
            "YES" => Some("Yes".into()),
            "NO" => Some("off".into()),
            "BAD" => Some("maybe".into()),
            _ => None,
        });
        assert_eq!(env.get("EMPTY"), None);
        assert_eq!(env.first(&["EMPTY", "YES"]).as_deref(), Some("Yes"));
        assert!(env.flag("YES").unwrap());
        assert!(!env.flag("NO").unwrap());
        assert!(!env.flag("UNSET").unwrap());
        assert_eq!(env.flag("BAD").unwrap_err().kind(), ErrorKind::InvalidInput);
    }
}
