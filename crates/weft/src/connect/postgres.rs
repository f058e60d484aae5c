//! Where a PostgreSQL log is: `postgres://USER@HOST/DB?log=NAME`, parsed
//! into the connection settings and the log's (schema's) name. With the
//! `postgres` feature; [`Location::parse`](super::Location::parse) answers
//! such a URL with [`Location::Postgres`](super::Location::Postgres).

use std::str::FromStr;

use crate::error::{Error, Result};

/// The longest log name: it becomes a schema name (at most 63 bytes in
/// PostgreSQL) and, prefixed with `weft_`, a NOTIFY channel name.
pub const MAX_LOG_NAME_BYTES: usize = 48;

/// A log on a PostgreSQL server: the connection settings and the log's name.
///
/// Written as a URL, `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE?log=NAME`
/// (`postgresql://` works too). `log` names the schema that holds the log
/// (lowercase ASCII letters, digits and `_`, starting with a letter or `_`,
/// at most [`MAX_LOG_NAME_BYTES`]; default `weft`); every other query
/// parameter is a libpq connection parameter that tokio-postgres knows
/// (`connect_timeout`, `application_name`, `options`, ...), or one of
/// libpq's TLS parameters, which weft reads itself:
///
/// * `sslmode` — `disable`, `prefer` (the default: TLS when the server
///   offers it, its certificate unchecked), `require` (TLS or no
///   connection; the certificate is checked against `sslrootcert` when one
///   is given, as libpq does), `verify-ca` (the certificate must chain to a
///   trusted root) or `verify-full` (and name the host);
/// * `sslrootcert` — a PEM file of the roots to trust, or `system` for the
///   operating system's store (the default of `verify-ca`/`verify-full`).
///
/// A `dbname` parameter must agree with the URL's path when both are
/// given.
///
/// ```
/// use weft::connect::PgLocation;
///
/// let loc: PgLocation = "postgres://app@db.example:5433/shop?log=orders".parse()?;
/// assert_eq!(loc.log(), "orders");
/// assert_eq!(loc.to_string(), "postgres://app@db.example:5433/shop?log=orders");
/// assert!("postgres://app@db/shop?log=Orders".parse::<PgLocation>().is_err());
/// # Ok::<(), weft::Error>(())
/// ```
#[derive(Clone)]
pub struct PgLocation {
    url: String,
    connection: String,
    log: String,
    config: tokio_postgres::Config,
    ssl_mode: PgSslMode,
    ssl_root_cert: Option<String>,
}

/// How a connection to PostgreSQL uses TLS (libpq's `sslmode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum PgSslMode {
    /// Never.
    Disable,
    /// When the server offers it; its certificate is not checked.
    #[default]
    Prefer,
    /// Always; the certificate is checked only against an explicit
    /// `sslrootcert`.
    Require,
    /// Always, with a certificate that chains to a trusted root.
    VerifyCa,
    /// Always, with a certificate that chains to a trusted root and names
    /// the host connected to.
    VerifyFull,
}

impl PgSslMode {
    fn parse(value: &str) -> Result<PgSslMode> {
        Ok(match value {
            "disable" => PgSslMode::Disable,
            "prefer" => PgSslMode::Prefer,
            "require" => PgSslMode::Require,
            "verify-ca" => PgSslMode::VerifyCa,
            "verify-full" => PgSslMode::VerifyFull,
            _ => {
                return Err(Error::invalid_input(format!(
                    "sslmode={value:?} is not one of disable, prefer, require, verify-ca, \
                     verify-full"
                )));
            }
        })
    }

    /// The mode tokio-postgres negotiates with (the checks are weft's).
    fn negotiated(self) -> &'static str {
        match self {
            PgSslMode::Disable => "disable",
            PgSslMode::Prefer => "prefer",
            PgSslMode::Require | PgSslMode::VerifyCa | PgSslMode::VerifyFull => "require",
        }
    }
}

/// Two locations are equal when they are written the same.
impl PartialEq for PgLocation {
    fn eq(&self, other: &Self) -> bool {
        self.url == other.url
    }
}

impl Eq for PgLocation {}

impl std::fmt::Debug for PgLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may hold a password: show it redacted.
        write!(f, "PgLocation({self})")
    }
}

impl std::fmt::Display for PgLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&redact(&self.url))
    }
}

fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

/// Checks a log name.
///
/// Errors: `InvalidInput` unless it is 1 to [`MAX_LOG_NAME_BYTES`] bytes of
/// `[a-z0-9_]` not starting with a digit, and not a PostgreSQL system
/// schema name (`pg_*`, `information_schema`).
pub fn validate_log_name(name: &str) -> Result<()> {
    let ok_chars = name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    let starts_ok = name
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_lowercase() || b == b'_');
    if !ok_chars || !starts_ok || name.len() > MAX_LOG_NAME_BYTES {
        return Err(Error::invalid_input(format!(
            "log name {name:?} must be 1 to {MAX_LOG_NAME_BYTES} characters of a-z, 0-9 and _, \
             not starting with a digit"
        )));
    }
    if name.starts_with("pg_") || name == "information_schema" {
        return Err(Error::invalid_input(format!(
            "log name {name:?} is a PostgreSQL system schema"
        )));
    }
    Ok(())
}

impl PgLocation {
    /// The log's name (its schema).
    pub fn log(&self) -> &str {
        &self.log
    }

    /// The same server and database, another log.
    ///
    /// Errors: `InvalidInput` for a bad name (see [`validate_log_name`]).
    pub fn with_log(&self, log: &str) -> Result<PgLocation> {
        validate_log_name(log)?;
        let sep = if self.connection.contains('?') {
            '&'
        } else {
            '?'
        };
        format!("{}{sep}log={log}", self.connection).parse()
    }

    /// The connection settings.
    pub fn config(&self) -> &tokio_postgres::Config {
        &self.config
    }

    /// How connections use TLS (`sslmode`).
    pub fn ssl_mode(&self) -> PgSslMode {
        self.ssl_mode
    }

    /// The roots to trust (`sslrootcert`): a PEM file's path, or `system`.
    pub fn ssl_root_cert(&self) -> Option<&str> {
        self.ssl_root_cert.as_deref()
    }
}

impl FromStr for PgLocation {
    type Err = Error;

    fn from_str(url: &str) -> Result<Self> {
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(Error::invalid_input(format!(
                "{:?} is not a PostgreSQL location (postgres://USER@HOST/DB?log=NAME)",
                redact(url)
            )));
        }
        let (base, query) = match url.split_once('?') {
            Some((b, q)) => (b, Some(q)),
            None => (url, None),
        };
        let mut log = None;
        let mut ssl_mode = None;
        let mut ssl_root_cert = None;
        let mut rest = Vec::new();
        let twice =
            |name: &str| Error::invalid_input(format!("the location names `{name}=` twice"));
        for param in query.into_iter().flat_map(|q| q.split('&')) {
            if param.is_empty() {
                continue;
            }
            match param.split_once('=') {
                Some(("log", name)) => {
                    if log.replace(name.to_owned()).is_some() {
                        return Err(twice("log"));
                    }
                }
                Some(("sslmode", mode)) => {
                    if ssl_mode.replace(PgSslMode::parse(mode)?).is_some() {
                        return Err(twice("sslmode"));
                    }
                }
                Some(("sslrootcert", path)) => {
                    let path = percent_decoded(path)?;
                    if path.is_empty() {
                        return Err(Error::invalid_input("sslrootcert= names no file"));
                    }
                    if ssl_root_cert.replace(path).is_some() {
                        return Err(twice("sslrootcert"));
                    }
                }
                Some(("dbname", name)) => {
                    check_dbname(base, &percent_decoded(name)?)?;
                    rest.push(param);
                }
                _ => rest.push(param),
            }
        }
        let log = log.unwrap_or_else(|| "weft".to_owned());
        validate_log_name(&log)?;
        let ssl_mode = ssl_mode.unwrap_or_default();
        // What this location connects with, as written (for `with_log`),
        // and as tokio-postgres reads it (the TLS checks are weft's).
        let kept: Vec<&str> = query
            .into_iter()
            .flat_map(|q| q.split('&'))
            .filter(|p| !p.is_empty() && !p.starts_with("log="))
            .collect();
        let connection = if kept.is_empty() {
            base.to_owned()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        let negotiated = format!("sslmode={}", ssl_mode.negotiated());
        rest.push(&negotiated);
        let for_client = format!("{base}?{}", rest.join("&"));
        let config = tokio_postgres::Config::from_str(&for_client).map_err(|e| {
            Error::invalid_input(format!(
                "bad PostgreSQL location {}: {e}",
                redact(&connection)
            ))
        })?;
        if config.get_hosts().is_empty() {
            return Err(Error::invalid_input(format!(
                "PostgreSQL location {} names no host",
                redact(url)
            )));
        }
        Ok(PgLocation {
            url: url.to_owned(),
            connection,
            log,
            config,
            ssl_mode,
            ssl_root_cert,
        })
    }
}

/// A query parameter's value, percent-decoded.
fn percent_decoded(value: &str) -> Result<String> {
    percent_encoding::percent_decode_str(value)
        .decode_utf8()
        .map(|v| v.into_owned())
        .map_err(|_| Error::invalid_input("a location parameter is not UTF-8"))
}

/// Refuses a `dbname=` parameter that names another database than the
/// URL's path: which one would win is not something to leave to a parser.
fn check_dbname(base: &str, dbname: &str) -> Result<()> {
    let rest = base.split_once("://").map_or(base, |(_, r)| r);
    let path = rest.split_once('/').map_or("", |(_, p)| p);
    let path = percent_decoded(path)?;
    if !path.is_empty() && path != dbname {
        return Err(Error::invalid_input(format!(
            "the location names database {path:?} in its path and {dbname:?} in dbname="
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_parse_and_redact() {
        let loc: PgLocation = "postgres://u:secret@127.0.0.1:5999/db?log=a_1&connect_timeout=3"
            .parse()
            .unwrap();
        assert_eq!(loc.log(), "a_1");
        assert!(!loc.to_string().contains("secret"));
        assert!(!format!("{loc:?}").contains("secret"));
        assert_eq!(loc.config().get_ports(), &[5999]);
        let other = loc.with_log("b").unwrap();
        assert_eq!(other.log(), "b");
        assert_eq!(
            "postgresql://u@h/db".parse::<PgLocation>().unwrap().log(),
            "weft"
        );
        // The one parser behind every location.
        assert_eq!(
            super::super::Location::parse("postgres://u@h/db?log=a_1").unwrap(),
            super::super::Location::Postgres(Box::new(
                "postgres://u@h/db?log=a_1".parse().unwrap()
            ))
        );
        assert_eq!(
            super::super::Location::parse("postgres://u@h/db?log=A")
                .unwrap_err()
                .kind(),
            crate::ErrorKind::InvalidInput
        );
        for bad in [
            "s3://b/p",
            "postgres://u@h/db?log=A",
            "postgres://u@h/db?log=1a",
            "postgres://u@h/db?log=",
            "postgres://u@h/db?log=pg_x",
            "postgres://u@h/db?log=a&log=b",
            "postgres://u@h/db?log=a;drop",
            "postgres://u@h/db?bogus_param=1",
            "postgres://u@h:99999/db",
        ] {
            let err = bad.parse::<PgLocation>().unwrap_err();
            assert_eq!(err.kind(), crate::ErrorKind::InvalidInput, "{bad}");
        }
        let long = format!(
            "postgres://u@h/db?log={}",
            "a".repeat(MAX_LOG_NAME_BYTES + 1)
        );
        assert!(long.parse::<PgLocation>().is_err());
    }
}
