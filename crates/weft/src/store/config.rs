//! Where a log lives, and how to build the object store that reaches it.
//!
//! [`Location::parse`] turns the text a user types (`s3://bucket/prefix`,
//! `az://container/prefix`, `file:///path`, `/plain/dir`) into a
//! [`Location`]; [`S3Settings`] holds the connection settings of an
//! S3-compatible bucket, read from the standard AWS environment variables and
//! overridable field by field; [`S3Settings::build`] returns an
//! `Arc<dyn ObjectStore>` rooted at the prefix. The Azure counterpart is
//! [`AzureSettings`](super::AzureSettings) (in [`azure`](super::azure));
//! [`StoreSettings`] carries both, and [`build_store`] picks by location.
//!
//! Settings chosen for S3-compatible servers (SeaweedFS, MinIO, R2):
//! path-style requests (the bucket in the path, not the host name), ETag
//! conditional puts (`If-Match` / `If-None-Match`), and few HTTP-level retries
//! inside object_store: weft's callers retry with their own
//! [`RetryPolicy`](super::RetryPolicy), which knows which failures are
//! ambiguous.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, S3ConditionalPut};
use object_store::local::LocalFileSystem;
use object_store::prefix::PrefixStore;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, RetryConfig};
use serde::{Deserialize, Serialize};

use super::azure::{AzureSettings, validate_container};
use crate::error::{Error, ErrorKind, Result};

/// Where a log lives.
#[derive(Debug, Clone, PartialEq, Eq)]
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
}

impl Location {
    /// Parses `s3://bucket[/prefix]`, `az://container[/prefix]`,
    /// `file:///absolute/path` or a plain path (absolute or relative).
    ///
    /// Errors: [`ErrorKind::InvalidInput`] for an empty string, an unknown
    /// scheme, a missing or invalid bucket or container name, a `file://`
    /// URL that is not absolute or has a host, or a prefix with empty
    /// segments (`a//b`).
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
            return Ok(Location::File {
                path: PathBuf::from(rest),
            });
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
        }
    }
}

/// Splits `rest` (a URL after its scheme) into the bucket or container and
/// the prefix, without trailing `/`.
fn split_prefix<'a>(text: &str, rest: &'a str) -> Result<(&'a str, &'a str)> {
    let (name, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let prefix = prefix.trim_end_matches('/');
    if !prefix.is_empty() && prefix.split('/').any(str::is_empty) {
        return Err(Error::invalid_input(format!(
            "location {text:?}: the prefix has an empty path segment"
        )));
    }
    Ok((name, prefix))
}

fn validate_bucket(bucket: &str) -> Result<()> {
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

/// Connection settings for an S3-compatible bucket.
///
/// Plain data: build it with [`S3Settings::from_env`] and override fields,
/// or deserialize it. `None` fields fall back to object_store's defaults.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct S3Settings {
    /// Bucket name.
    pub bucket: String,
    /// Key prefix inside the bucket ("" = bucket root).
    pub prefix: String,
    /// Endpoint URL (`AWS_ENDPOINT_URL`), e.g. `http://127.0.0.1:8333`.
    pub endpoint: Option<String>,
    /// Region (`AWS_REGION`, else `AWS_DEFAULT_REGION`); object_store
    /// defaults to `us-east-1`.
    pub region: Option<String>,
    /// Access key id (`AWS_ACCESS_KEY_ID`).
    pub access_key_id: Option<String>,
    /// Secret access key (`AWS_SECRET_ACCESS_KEY`).
    pub secret_access_key: Option<String>,
    /// Session token (`AWS_SESSION_TOKEN`).
    pub session_token: Option<String>,
    /// Allow plain `http://` endpoints (`AWS_ALLOW_HTTP`).
    pub allow_http: bool,
    /// Use virtual-hosted-style requests (`bucket.host`); off by default,
    /// because S3-compatible servers on an IP address need path style.
    pub virtual_hosted_style: bool,
    /// Per-request timeout (object_store's default: 30 s).
    pub request_timeout: Option<Duration>,
    /// Connect timeout (object_store's default: 5 s).
    pub connect_timeout: Option<Duration>,
    /// Retries object_store itself makes on 5xx and connection errors before
    /// a request fails (default 2, bounded by [`Self::http_retry_timeout`]).
    pub http_retries: Option<usize>,
    /// Upper bound of the time object_store spends on its own retries
    /// (default 10 s).
    pub http_retry_timeout: Option<Duration>,
}

impl fmt::Debug for S3Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Settings")
            .field("bucket", &self.bucket)
            .field("prefix", &self.prefix)
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field(
                "secret_access_key",
                &self.secret_access_key.as_ref().map(|_| "<redacted>"),
            )
            .field(
                "session_token",
                &self.session_token.as_ref().map(|_| "<redacted>"),
            )
            .field("allow_http", &self.allow_http)
            .field("virtual_hosted_style", &self.virtual_hosted_style)
            .field("request_timeout", &self.request_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("http_retries", &self.http_retries)
            .field("http_retry_timeout", &self.http_retry_timeout)
            .finish()
    }
}

impl S3Settings {
    /// Settings for `bucket`/`prefix` with nothing else set.
    pub fn new(bucket: impl Into<String>, prefix: impl Into<String>) -> Self {
        S3Settings {
            bucket: bucket.into(),
            prefix: prefix.into(),
            ..S3Settings::default()
        }
    }

    /// Settings for `bucket`/`prefix` from the process environment
    /// (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
    /// `AWS_SESSION_TOKEN`, `AWS_REGION`/`AWS_DEFAULT_REGION`,
    /// `AWS_ALLOW_HTTP`).
    ///
    /// Errors: [`ErrorKind::InvalidInput`] when `AWS_ALLOW_HTTP` is not a
    /// boolean.
    pub fn from_env(bucket: impl Into<String>, prefix: impl Into<String>) -> Result<Self> {
        S3Settings::from_lookup(bucket, prefix, |key| std::env::var(key).ok())
    }

    /// Like [`S3Settings::from_env`], reading variables through `lookup`
    /// (so callers and tests need not touch the process environment).
    pub fn from_lookup(
        bucket: impl Into<String>,
        prefix: impl Into<String>,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self> {
        let get = |key: &str| lookup(key).filter(|v| !v.is_empty());
        let allow_http = match get("AWS_ALLOW_HTTP") {
            None => false,
            Some(v) => parse_bool(&v).ok_or_else(|| {
                Error::invalid_input(format!("AWS_ALLOW_HTTP={v:?} is not true/false"))
            })?,
        };
        Ok(S3Settings {
            endpoint: get("AWS_ENDPOINT_URL").or_else(|| get("AWS_ENDPOINT")),
            region: get("AWS_REGION").or_else(|| get("AWS_DEFAULT_REGION")),
            access_key_id: get("AWS_ACCESS_KEY_ID"),
            secret_access_key: get("AWS_SECRET_ACCESS_KEY"),
            session_token: get("AWS_SESSION_TOKEN"),
            allow_http,
            ..S3Settings::new(bucket, prefix)
        })
    }

    /// Builds the store, rooted at [`Self::prefix`] when it is not empty
    /// (every path the caller uses is relative to the prefix).
    ///
    /// No request is sent; wrong credentials or an unreachable endpoint show
    /// up on the first request. Errors: [`ErrorKind::InvalidInput`] for an
    /// invalid bucket name, an access key without a secret (or the reverse),
    /// or settings object_store rejects (for example an `http://` endpoint
    /// without `allow_http`).
    pub fn build(&self) -> Result<Arc<dyn ObjectStore>> {
        validate_bucket(&self.bucket)?;
        if self.access_key_id.is_some() != self.secret_access_key.is_some() {
            return Err(Error::invalid_input(
                "an access key id needs a secret access key, and the reverse",
            ));
        }
        let client = client_options(self.request_timeout, self.connect_timeout);
        let retry = retry_config(self.http_retries, self.http_retry_timeout);
        // `with_client_options` replaces the whole ClientOptions, allow_http
        // included, so the client options go first and allow_http after.
        let mut builder = AmazonS3Builder::new()
            .with_client_options(client)
            .with_allow_http(self.allow_http)
            .with_bucket_name(&self.bucket)
            .with_virtual_hosted_style_request(self.virtual_hosted_style)
            .with_conditional_put(S3ConditionalPut::ETagMatch)
            .with_retry(retry);
        if let Some(endpoint) = &self.endpoint {
            builder = builder.with_endpoint(endpoint);
        }
        if let Some(region) = &self.region {
            builder = builder.with_region(region);
        }
        if let Some(key) = &self.access_key_id {
            builder = builder.with_access_key_id(key);
        }
        if let Some(secret) = &self.secret_access_key {
            builder = builder.with_secret_access_key(secret);
        }
        if let Some(token) = &self.session_token {
            builder = builder.with_token(token);
        }
        let s3 = builder.build().map_err(|e| {
            Error::new(
                ErrorKind::InvalidInput,
                format!("cannot configure bucket {:?}", self.bucket),
            )
            .with_source(e)
        })?;
        let store: Arc<dyn ObjectStore> = Arc::new(s3);
        Ok(with_prefix(store, &self.prefix))
    }
}

/// The HTTP client options every cloud store gets: the given timeouts, and
/// object_store's defaults for the rest.
pub(crate) fn client_options(
    request_timeout: Option<Duration>,
    connect_timeout: Option<Duration>,
) -> ClientOptions {
    let mut client = ClientOptions::new();
    if let Some(t) = request_timeout {
        client = client.with_timeout(t);
    }
    if let Some(t) = connect_timeout {
        client = client.with_connect_timeout(t);
    }
    client
}

/// object_store's own HTTP retries: few and short, because weft's callers
/// retry with a [`RetryPolicy`](super::RetryPolicy) that knows which
/// failures are ambiguous.
pub(crate) fn retry_config(retries: Option<usize>, timeout: Option<Duration>) -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(1),
            base: 2.0,
        },
        max_retries: retries.unwrap_or(2),
        retry_timeout: timeout.unwrap_or(Duration::from_secs(10)),
    }
}

/// The connection settings of every kind of object store a [`Location`]
/// can name; [`build_store`] uses the part that matches the location (its
/// bucket or container and prefix come from the location).
///
/// `&S3Settings` and `&AzureSettings` convert into it, so a caller that only
/// deals with one cloud passes its settings as they are.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StoreSettings {
    /// Used for [`Location::S3`].
    pub s3: S3Settings,
    /// Used for [`Location::Azure`].
    pub azure: AzureSettings,
}

impl StoreSettings {
    /// Both clouds' settings from the process environment (see
    /// [`S3Settings::from_env`] and [`AzureSettings::from_env`]).
    ///
    /// Errors: [`ErrorKind::InvalidInput`] for a boolean variable that is
    /// not a boolean.
    pub fn from_env() -> Result<Self> {
        Ok(StoreSettings {
            s3: S3Settings::from_env("", "")?,
            azure: AzureSettings::from_env("", "")?,
        })
    }
}

impl From<S3Settings> for StoreSettings {
    fn from(s3: S3Settings) -> Self {
        StoreSettings {
            s3,
            ..StoreSettings::default()
        }
    }
}

impl From<&S3Settings> for StoreSettings {
    fn from(s3: &S3Settings) -> Self {
        StoreSettings::from(s3.clone())
    }
}

impl From<AzureSettings> for StoreSettings {
    fn from(azure: AzureSettings) -> Self {
        StoreSettings {
            azure,
            ..StoreSettings::default()
        }
    }
}

impl From<&AzureSettings> for StoreSettings {
    fn from(azure: &AzureSettings) -> Self {
        StoreSettings::from(azure.clone())
    }
}

impl From<&StoreSettings> for StoreSettings {
    fn from(settings: &StoreSettings) -> Self {
        settings.clone()
    }
}

/// Roots `store` at `prefix` (returned unchanged when `prefix` is empty).
pub fn with_prefix(store: Arc<dyn ObjectStore>, prefix: &str) -> Arc<dyn ObjectStore> {
    let prefix = prefix.trim_matches('/');
    if prefix.is_empty() {
        store
    } else {
        Arc::new(PrefixStore::new(store, prefix))
    }
}

/// Builds the object store for a [`Location::S3`] or [`Location::Azure`]
/// (with the matching part of `settings` for everything but the bucket or
/// container and the prefix) or a [`Location::File`] (created if missing).
///
/// Note that object_store's local file store cannot do `If-Match` updates,
/// so a `file://` store can be read but not written by the producer.
///
/// Errors: [`ErrorKind::InvalidInput`] for a [`Location::Dir`] (that is the
/// `dir` backend, not an object store) and for bad settings; I/O errors
/// creating the directory.
pub fn build_store(
    location: &Location,
    settings: impl Into<StoreSettings>,
) -> Result<Arc<dyn ObjectStore>> {
    let settings = settings.into();
    match location {
        Location::S3 { bucket, prefix } => S3Settings {
            bucket: bucket.clone(),
            prefix: prefix.clone(),
            ..settings.s3
        }
        .build(),
        Location::Azure { container, prefix } => AzureSettings {
            container: container.clone(),
            prefix: prefix.clone(),
            ..settings.azure
        }
        .build(),
        Location::File { path } => {
            std::fs::create_dir_all(path)
                .map_err(|e| Error::io(format!("create {}", path.display()), e))?;
            let fs = LocalFileSystem::new_with_prefix(path).map_err(|e| {
                Error::new(
                    ErrorKind::InvalidInput,
                    format!("cannot use {} as an object store", path.display()),
                )
                .with_source(e)
            })?;
            Ok(Arc::new(fs))
        }
        Location::Dir { path } => Err(Error::invalid_input(format!(
            "{} is a plain directory (the dir backend), not an object store; \
             use file://{} for an object store in a directory",
            path.display(),
            path.display()
        ))),
    }
}

pub(crate) fn parse_bool(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

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
            "gs://bucket/x",
            "az://",
            "az:///prefix",
            "az://ab/x",
            "az://Logs/x",
            "az://logs_x/y",
            "az://a--b/c",
            "az://logs/a//b",
            "azure://logs/x",
            "http://host/x",
            "file://host/path",
            "file://relative",
        ] {
            let err = Location::parse(bad).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad:?}");
        }
    }

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn reads_the_standard_aws_variables() {
        let s = S3Settings::from_lookup(
            "logs",
            "p",
            env(&[
                ("AWS_ENDPOINT_URL", "http://127.0.0.1:9"),
                ("AWS_ACCESS_KEY_ID", "key"),
                ("AWS_SECRET_ACCESS_KEY", "secret"),
                ("AWS_DEFAULT_REGION", "eu-west-1"),
                ("AWS_ALLOW_HTTP", "true"),
            ]),
        )
        .unwrap();
        assert_eq!(s.endpoint.as_deref(), Some("http://127.0.0.1:9"));
        assert_eq!(s.region.as_deref(), Some("eu-west-1"));
        assert!(s.allow_http);
        assert!(!s.virtual_hosted_style);
        assert!(!format!("{s:?}").contains("secret\""), "secret is redacted");
        s.build().unwrap();

        let err =
            S3Settings::from_lookup("logs", "", env(&[("AWS_ALLOW_HTTP", "maybe")])).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
    }

    #[test]
    fn builds_for_http_endpoints_and_rejects_half_credentials() {
        let mut s = S3Settings::new("logs", "");
        s.endpoint = Some("http://127.0.0.1:9".into());
        s.access_key_id = Some("k".into());
        s.secret_access_key = Some("s".into());
        s.request_timeout = Some(Duration::from_secs(1));
        // Client options are applied first, so allow_http survives them.
        s.allow_http = true;
        s.build().unwrap();

        let mut half = s.clone();
        half.secret_access_key = None;
        assert_eq!(half.build().unwrap_err().kind(), ErrorKind::InvalidInput);
    }

    #[test]
    fn build_store_takes_either_clouds_settings() {
        let azure = AzureSettings {
            account: Some("acct".into()),
            access_key: Some(super::super::azure::EMULATOR_ACCOUNT_KEY.into()),
            endpoint: Some("http://127.0.0.1:9/acct".into()),
            allow_http: true,
            ..AzureSettings::default()
        };
        let s3 = S3Settings {
            endpoint: Some("http://127.0.0.1:9".into()),
            allow_http: true,
            ..S3Settings::default()
        };
        let az = Location::parse("az://logs/p").unwrap();
        let bucket = Location::parse("s3://logs/p").unwrap();
        build_store(&az, &azure).unwrap();
        build_store(&bucket, &s3).unwrap();
        let both = StoreSettings { s3, azure };
        build_store(&az, &both).unwrap();
        build_store(&bucket, &both).unwrap();
        // Azure settings alone say nothing about an account for S3 and the
        // reverse: an Azure location with only S3 settings has no account.
        let err = build_store(&az, &both.s3).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
    }

    #[test]
    fn dir_locations_are_not_object_stores() {
        let err =
            build_store(&Location::parse("/tmp/x").unwrap(), S3Settings::default()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
        let dir = tempfile::tempdir().unwrap();
        let loc = Location::parse(&format!("file://{}/sub", dir.path().display())).unwrap();
        build_store(&loc, S3Settings::default()).unwrap();
        assert!(dir.path().join("sub").is_dir());
    }
}
