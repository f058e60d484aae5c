//! Bearer tokens with scopes.
//!
//! A token grants one or more scopes: `read` (every GET of the log, KV,
//! subscriptions, status, metrics), `append` (appends, sessions and KV
//! writes) and `admin` (trim; it implies the other two). Tokens come from a
//! file or an environment variable in one format: one token per line (or
//! per `;` in the variable), `TOKEN SCOPE[,SCOPE...]`; `#` starts a comment.
//!
//! A request carries its token as `Authorization: Bearer TOKEN`, or (for a
//! browser's `EventSource` and WebSocket, which cannot set headers) as the
//! query parameter `access_token`.

use std::path::Path;

use weft::{Error, Result};

/// What a token allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Reads, subscriptions, status, metrics.
    Read,
    /// Appends, sessions, KV writes (but the log settings' scopes).
    Append,
    /// Trim, stream lifecycles, KV writes to the log settings' scopes
    /// (`_weft:retention`, `_weft:streams`); implies the others.
    Admin,
}

impl Scope {
    /// The scope's name in token files.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Append => "append",
            Scope::Admin => "admin",
        }
    }

    fn parse(text: &str) -> Result<Scope> {
        match text {
            "read" => Ok(Scope::Read),
            "append" => Ok(Scope::Append),
            "admin" => Ok(Scope::Admin),
            other => Err(Error::invalid_input(format!(
                "unknown token scope {other:?} (read, append or admin)"
            ))),
        }
    }
}

/// The tokens a server accepts.
#[derive(Clone, Default)]
pub struct Tokens {
    grants: Vec<(String, Vec<Scope>)>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secrets themselves.
        write!(f, "Tokens({} configured)", self.grants.len())
    }
}

/// How a request's token compares with what a route needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Let it in.
    Allowed,
    /// No token, or one the server does not know (401).
    Unauthenticated,
    /// A known token without the scope (403).
    Forbidden,
}

impl Tokens {
    /// Parses the token format (lines, or `;`-separated items).
    ///
    /// Errors: `InvalidInput` for a line without scopes, an unknown scope,
    /// or no token at all.
    pub fn parse(text: &str) -> Result<Tokens> {
        let mut grants = Vec::new();
        for item in text.split(['\n', ';']) {
            let item = item.split('#').next().unwrap_or("").trim();
            if item.is_empty() {
                continue;
            }
            let mut parts = item.split_whitespace();
            let (Some(token), Some(scopes), None) = (parts.next(), parts.next(), parts.next())
            else {
                return Err(Error::invalid_input(
                    "a token line is `TOKEN SCOPE[,SCOPE...]`",
                ));
            };
            let scopes = scopes
                .split(',')
                .map(Scope::parse)
                .collect::<Result<Vec<_>>>()?;
            grants.push((token.to_owned(), scopes));
        }
        if grants.is_empty() {
            return Err(Error::invalid_input("no token configured"));
        }
        Ok(Tokens { grants })
    }

    /// Reads the tokens of a file.
    ///
    /// Errors: the file's I/O kinds; as [`Tokens::parse`].
    pub fn from_file(path: &Path) -> Result<Tokens> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::io(format!("read tokens from {}", path.display()), e))?;
        Tokens::parse(&text)
    }

    /// Whether `token` may use a route that needs `scope`.
    pub fn check(&self, token: Option<&str>, scope: Scope) -> Verdict {
        let Some(token) = token else {
            return Verdict::Unauthenticated;
        };
        // Every configured token is compared, each in constant time, so
        // the answer's timing says nothing about which bytes matched.
        let mut found: Option<&[Scope]> = None;
        for (known, scopes) in &self.grants {
            if same(known.as_bytes(), token.as_bytes()) {
                found = Some(scopes);
            }
        }
        match found {
            None => Verdict::Unauthenticated,
            Some(scopes) if scopes.contains(&scope) || scopes.contains(&Scope::Admin) => {
                Verdict::Allowed
            }
            Some(_) => Verdict::Forbidden,
        }
    }
}

fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_are_checked_and_admin_implies_all() {
        let t = Tokens::parse("r read # a reader\nw read,append; boss admin").unwrap();
        assert_eq!(t.check(Some("r"), Scope::Read), Verdict::Allowed);
        assert_eq!(t.check(Some("r"), Scope::Append), Verdict::Forbidden);
        assert_eq!(t.check(Some("w"), Scope::Append), Verdict::Allowed);
        assert_eq!(t.check(Some("w"), Scope::Admin), Verdict::Forbidden);
        assert_eq!(t.check(Some("boss"), Scope::Append), Verdict::Allowed);
        assert_eq!(
            t.check(Some("nobody"), Scope::Read),
            Verdict::Unauthenticated
        );
        assert_eq!(t.check(None, Scope::Read), Verdict::Unauthenticated);
        assert!(format!("{t:?}").find("boss").is_none());
    }

    #[test]
    fn malformed_token_files_are_refused() {
        for bad in ["", "# nothing", "lonely", "t read extra", "t write"] {
            assert!(Tokens::parse(bad).is_err(), "{bad:?}");
        }
    }
}
