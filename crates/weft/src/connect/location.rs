//! Where a log lives, as a user writes it: `s3://bucket/prefix`,
//! `az://container/prefix`, `file:///path` or a plain directory.
//!
//! Parsing is pure (no feature needed, no I/O) and refuses anything that
//! would later reach a store in a form it could misread: bucket and
//! container names outside their services' rules, and prefixes with empty,
//! `.` or `..` segments (a store would keep `..` as a literal name or, on
//! local files, climb out of the directory).

use std::fmt;
use std::path::PathBuf;

use crate::error::{Error, Result};

/// Where a log lives.
///
/// Non-exhaustive: more backends may get their own variant, so a `match`
/// needs a wildcard arm.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Location {
    /// An S3-compatible bucket, with an optional key prefix (no leading or
    /// trailing `/`; empty for the bucket root).
    S3 {
        /// The bucket name.
        bucket: String,
        /// The key prefix inside the bucket.
        prefix: String,
    },
    /// An Azure Blob container, with an optional blob-name prefix (no
    /// leading or trailing `/`; empty for the container root).
    Azure {
        /// The container name.
        container: String,
        /// The blob-name prefix inside the container.
        prefix: String,
    },
    /// A local directory used as an object store (`file:///path`).
    File {
        /// The directory.
        path: PathBuf,
    },
    /// A local directory for the `dir` backend (a plain path).
    Dir {
        /// The directory.
        path: PathBuf,
    },
    /// A log on a PostgreSQL server, `postgres://USER@HOST/DB?log=NAME`
    /// (feature `postgres`).
    #[cfg(feature = "postgres")]
    Postgres(Box<super::PgLocation>),
}

impl Location {
    /// Parses `s3://bucket[/prefix]`, `az://container[/prefix]`,
    /// `file:///absolute/path`, `postgres://USER@HOST/DB?log=NAME` (see
    /// [`PgLocation`](super::PgLocation); `Unsupported` without the
    /// `postgres` feature) or a plain path (absolute or relative).
    ///
    /// Errors: [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput)
    /// for an empty string, an unknown scheme, a missing or invalid bucket
    /// or container name, a `file://` URL that is not absolute or has a
    /// host, or a prefix (or `file://` path) with an empty, `.` or `..`
    /// segment.
    pub fn parse(text: &str) -> Result<Location> {
        let text = text.trim();
        if text.is_empty() {
            return Err(Error::invalid_input("location is empty"));
        }
        if let Some(rest) = text.strip_prefix("s3://") {
            let (bucket, prefix) = split_prefix(text, rest)?;
            validate_bucket(bucket)?;
            return Ok(Location::S3 {
                bucket: bucket.to_string(),
                prefix: prefix.to_string(),
            });
        }
        if let Some(rest) = text.strip_prefix("az://") {
            let (container, prefix) = split_prefix(text, rest)?;
            validate_container(container)?;
            return Ok(Location::Azure {
                container: container.to_string(),
                prefix: prefix.to_string(),
            });
        }
        if let Some(rest) = text.strip_prefix("file://") {
            if !rest.starts_with('/') {
                return Err(Error::invalid_input(format!(
                    "location {text:?}: a file URL needs an absolute path and no host \
                     (file:///path)"
                )));
            }
            let what = format!("location {text:?}");
            check_segments(&what, rest.trim_start_matches('/').trim_end_matches('/'))?;
            return Ok(Location::File {
                path: PathBuf::from(rest),
            });
        }
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            #[cfg(feature = "postgres")]
            return text.parse().map(|pg| Location::Postgres(Box::new(pg)));
            #[cfg(not(feature = "postgres"))]
            return Err(Error::new(
                crate::ErrorKind::Unsupported,
                "a postgres:// location needs weft built with the `postgres` feature",
            ));
        }
        if let Some((scheme, _)) = text.split_once("://") {
            return Err(Error::invalid_input(format!(
                "location {text:?}: unsupported scheme {scheme:?} \
                 (use s3://, az://, file:// or a path)"
            )));
        }
        Ok(Location::Dir {
            path: PathBuf::from(text),
        })
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::S3 { bucket, prefix } if prefix.is_empty() => write!(f, "s3://{bucket}"),
            Location::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
            Location::Azure { container, prefix } if prefix.is_empty() => {
                write!(f, "az://{container}")
            }
            Location::Azure { container, prefix } => write!(f, "az://{container}/{prefix}"),
            Location::File { path } => write!(f, "file://{}", path.display()),
            Location::Dir { path } => write!(f, "{}", path.display()),
            #[cfg(feature = "postgres")]
            Location::Postgres(pg) => write!(f, "{pg}"),
        }
    }
}

/// Splits `rest` (a URL after its scheme) into the bucket or container and
/// the prefix, without trailing `/`.
fn split_prefix<'a>(text: &str, rest: &'a str) -> Result<(&'a str, &'a str)> {
    let (name, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let prefix = prefix.trim_end_matches('/');
    check_segments(&format!("location {text:?}"), prefix)?;
    Ok((name, prefix))
}

/// Checks a key prefix given as a setting rather than inside a location:
/// leading and trailing `/` are ignored, the rest follows a location's
/// rules.
#[cfg_attr(not(any(feature = "aws", feature = "azure")), allow(dead_code))]
pub(crate) fn validate_prefix(prefix: &str) -> Result<()> {
    check_segments(&format!("prefix {prefix:?}"), prefix.trim_matches('/'))
}

/// Refuses empty, `.` and `..` segments in a `/`-separated path ("" is the
/// root and fine), and control characters anywhere in it. `what` names the
/// path in messages.
fn check_segments(what: &str, path: &str) -> Result<()> {
    if path.chars().any(char::is_control) {
        return Err(Error::invalid_input(format!(
            "{what}: the path has a control character"
        )));
    }
    if path.is_empty() {
        return Ok(());
    }
    for segment in path.split('/') {
        let problem = match segment {
            "" => "an empty segment",
            "." => "a `.` segment",
            ".." => "a `..` segment",
            _ => continue,
        };
        return Err(Error::invalid_input(format!(
            "{what}: the path has {problem}"
        )));
    }
    Ok(())
}

/// Checks S3's bucket naming rules, loosely (what S3-compatible servers
/// accept): lowercase letters, digits, `.`, `-` and `_`, at most 63
/// characters.
pub(crate) fn validate_bucket(bucket: &str) -> Result<()> {
    if bucket.is_empty() {
        return Err(Error::invalid_input(
            "s3 location has no bucket (s3://bucket/prefix)",
        ));
    }
    let ok = bucket
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '-' | '_'));
    if !ok || bucket.len() > 63 {
        return Err(Error::invalid_input(format!(
            "bucket name {bucket:?} is not valid (lowercase letters, digits, '.', '-', '_'; \
             at most 63 characters)"
        )));
    }
    Ok(())
}

/// Checks Azure's container naming rules: 3 to 63 characters, lowercase
/// letters, digits and single hyphens, starting and ending with a letter or
/// digit.
pub(crate) fn validate_container(container: &str) -> Result<()> {
    if container.is_empty() {
        return Err(Error::invalid_input(
            "azure location has no container (az://container/prefix)",
        ));
    }
    let chars_ok = container
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    let ends_ok = !container.starts_with('-') && !container.ends_with('-');
    if !chars_ok || !ends_ok || container.contains("--") || !(3..=63).contains(&container.len()) {
        return Err(Error::invalid_input(format!(
            "container name {container:?} is not valid (3 to 63 lowercase letters, digits and \
             single '-', starting and ending with a letter or digit)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn parses_s3_locations() {
        assert_eq!(
            Location::parse("s3://logs/team/orders/").unwrap(),
            Location::S3 {
                bucket: "logs".into(),
                prefix: "team/orders".into()
            }
        );
        assert_eq!(
            Location::parse("s3://logs").unwrap(),
            Location::S3 {
                bucket: "logs".into(),
                prefix: "".into()
            }
        );
        let loc = Location::parse("s3://logs/a/b").unwrap();
        assert_eq!(loc.to_string(), "s3://logs/a/b");
        // Dots inside a segment are ordinary characters.
        assert_eq!(
            Location::parse("s3://logs/v1.2/..x/.hidden").unwrap(),
            Location::S3 {
                bucket: "logs".into(),
                prefix: "v1.2/..x/.hidden".into()
            }
        );
    }

    #[test]
    fn parses_azure_locations() {
        assert_eq!(
            Location::parse("az://logs/team/orders/").unwrap(),
            Location::Azure {
                container: "logs".into(),
                prefix: "team/orders".into()
            }
        );
        let root = Location::parse("az://weft-test").unwrap();
        assert_eq!(
            root,
            Location::Azure {
                container: "weft-test".into(),
                prefix: "".into()
            }
        );
        assert_eq!(root.to_string(), "az://weft-test");
        let loc = Location::parse("az://logs/a/b").unwrap();
        assert_eq!(loc.to_string(), "az://logs/a/b");
        assert_eq!(Location::parse(&loc.to_string()).unwrap(), loc);
    }

    #[test]
    fn parses_file_and_dir_locations() {
        assert_eq!(
            Location::parse("file:///var/lib/weft").unwrap(),
            Location::File {
                path: "/var/lib/weft".into()
            }
        );
        assert_eq!(
            Location::parse("/plain/dir").unwrap(),
            Location::Dir {
                path: "/plain/dir".into()
            }
        );
        assert_eq!(
            Location::parse("relative/dir").unwrap(),
            Location::Dir {
                path: "relative/dir".into()
            }
        );
    }

    #[test]
    fn rejects_bad_locations_with_invalid_input() {
        for bad in [
            "",
            "   ",
            "s3://",
            "s3:///prefix",
            "s3://Upper/x",
            "s3://b/a//c",
            "s3://bucket/../x",
            "s3://bucket/a/./b",
            "s3://bucket/a/..",
            "s3://bucket/.",
            "s3://bucket/a\nb",
            "gs://bucket/x",
            "az://",
            "az:///prefix",
            "az://ab/x",
            "az://Logs/x",
            "az://logs_x/y",
            "az://a--b/c",
            "az://logs/a//b",
            "az://logs/../x",
            "az://logs/x/./y",
            "azure://logs/x",
            "http://host/x",
            "file://host/path",
            "file://relative",
            "file:///var/../etc",
            "file:///var/./lib",
        ] {
            let err = Location::parse(bad).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad:?}");
        }
    }

    #[test]
    fn container_names_follow_azure_rules() {
        for ok in ["abc", "weft-test", "a1-b2-c3", &"a".repeat(63)] {
            validate_container(ok).unwrap();
        }
        for bad in [
            "",
            "ab",
            "-abc",
            "abc-",
            "a--b",
            "ABC",
            "a_b",
            "a.b",
            &"a".repeat(64),
        ] {
            assert_eq!(
                validate_container(bad).unwrap_err().kind(),
                ErrorKind::InvalidInput,
                "{bad:?}"
            );
        }
    }
}
