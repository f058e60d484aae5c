//! Connection settings for an S3-compatible bucket, and building its store.
//!
//! [`S3Settings`] is plain data: read it from the standard AWS environment
//! variables, override fields, then [`S3Settings::build`] an
//! `Arc<dyn ObjectStore>` rooted at the prefix.
//!
//! Settings chosen for S3-compatible servers (SeaweedFS, MinIO, R2):
//! path-style requests (the bucket in the path, not the host name), ETag
//! conditional puts (`If-Match` / `If-None-Match`), and few HTTP-level retries
//! inside object_store: weft's callers retry with their own
//! [`RetryPolicy`](crate::objects::RetryPolicy), which knows which failures
//! are ambiguous.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;
use object_store::aws::{AmazonS3Builder, S3ConditionalPut};
use serde::{Deserialize, Serialize};

use super::env::{self, Env};
use super::http;
use super::location::{validate_bucket, validate_prefix};
use crate::error::{Error, ErrorKind, Result};
use crate::objects::with_prefix;

/// Connection settings for an S3-compatible bucket.
///
/// Plain data: build it with [`S3Settings::from_env`] and override fields,
/// or deserialize it. `None` fields fall back to object_store's defaults.
/// Nothing is checked until [`S3Settings::build`].
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
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
    /// Sign requests without hashing their bodies (`AWS_UNSIGNED_PAYLOAD`;
    /// off by default).
    ///
    /// SigV4 normally puts the SHA-256 of every uploaded body into the
    /// signature, and the server hashes the body again to check it: two
    /// passes over every segment byte, one on each side. With this set the
    /// signature covers the headers only (`UNSIGNED-PAYLOAD`), and nothing
    /// checks the body between the client's memory and the server's: its
    /// integrity in transit rests on TLS (and on plain `http://`, on TCP's
    /// 16-bit checksum alone). A body damaged on the way would be stored and
    /// acknowledged; weft's segment checksum (CRC-32C) still refuses it on
    /// every read (`Corrupt`), but the append it held would be lost. Off by
    /// default for that reason; turn it on for `https://` endpoints that
    /// terminate TLS at the storage server itself, where the hash buys
    /// little and costs CPU on both ends.
    pub unsigned_payload: bool,
}

setters! {
    S3Settings {
        with_bucket => bucket: String,
        with_prefix => prefix: String,
        with_endpoint => endpoint: Option<String>,
        with_region => region: Option<String>,
        with_access_key_id => access_key_id: Option<String>,
        with_secret_access_key => secret_access_key: Option<String>,
        with_session_token => session_token: Option<String>,
        with_allow_http => allow_http: bool,
        with_virtual_hosted_style => virtual_hosted_style: bool,
        with_request_timeout => request_timeout: Option<Duration>,
        with_connect_timeout => connect_timeout: Option<Duration>,
        with_http_retries => http_retries: Option<usize>,
        with_http_retry_timeout => http_retry_timeout: Option<Duration>,
        with_unsigned_payload => unsigned_payload: bool,
    }
}

impl fmt::Debug for S3Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redact = |v: &Option<String>| v.as_ref().map(|_| "<redacted>");
        f.debug_struct("S3Settings")
            .field("bucket", &self.bucket)
            .field("prefix", &self.prefix)
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &redact(&self.secret_access_key))
            .field("session_token", &redact(&self.session_token))
            .field("allow_http", &self.allow_http)
            .field("virtual_hosted_style", &self.virtual_hosted_style)
            .field("request_timeout", &self.request_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("http_retries", &self.http_retries)
            .field("http_retry_timeout", &self.http_retry_timeout)
            .field("unsigned_payload", &self.unsigned_payload)
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
    /// `AWS_ALLOW_HTTP`, `AWS_UNSIGNED_PAYLOAD`). Empty variables count as
    /// unset.
    ///
    /// Errors: [`ErrorKind::InvalidInput`] when `AWS_ALLOW_HTTP` or
    /// `AWS_UNSIGNED_PAYLOAD` is not a boolean. The other values are checked by [`Self::build`].
    pub fn from_env(bucket: impl Into<String>, prefix: impl Into<String>) -> Result<Self> {
        S3Settings::from_lookup(bucket, prefix, env::process)
    }

    /// Like [`S3Settings::from_env`], reading variables through `lookup`
    /// (so callers and tests need not touch the process environment).
    pub fn from_lookup(
        bucket: impl Into<String>,
        prefix: impl Into<String>,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self> {
        let env = Env::new(lookup);
        Ok(S3Settings {
            endpoint: env.first(&["AWS_ENDPOINT_URL", "AWS_ENDPOINT"]),
            region: env.first(&["AWS_REGION", "AWS_DEFAULT_REGION"]),
            access_key_id: env.get("AWS_ACCESS_KEY_ID"),
            secret_access_key: env.get("AWS_SECRET_ACCESS_KEY"),
            session_token: env.get("AWS_SESSION_TOKEN"),
            allow_http: env.flag("AWS_ALLOW_HTTP")?,
            unsigned_payload: env.flag("AWS_UNSIGNED_PAYLOAD")?,
            ..S3Settings::new(bucket, prefix)
        })
    }

    /// Builds the store, rooted at [`Self::prefix`] when it is not empty
    /// (every path the caller uses is relative to the prefix).
    ///
    /// No request is sent; wrong credentials or an unreachable endpoint show
    /// up on the first request. Errors: as [`Self::to_builder`].
    pub fn build(&self) -> Result<Arc<dyn ObjectStore>> {
        let s3 = self.to_builder()?.build().map_err(|e| {
            Error::new(
                ErrorKind::InvalidInput,
                format!("cannot configure bucket {:?}", self.bucket),
            )
            .with_source(e)
        })?;
        let store: Arc<dyn ObjectStore> = Arc::new(s3);
        Ok(with_prefix(store, &self.prefix))
    }

    /// Checks the settings and returns object_store's builder configured
    /// with them, for a caller that adds what these settings do not cover
    /// (an HTTP connector, say) before building. The prefix is not applied:
    /// wrap the built store with `with_prefix`.
    ///
    /// Errors: [`ErrorKind::InvalidInput`] for an invalid bucket name or
    /// prefix; an endpoint that is not an `http(s)://host[:port][/path]`
    /// URL, or is plain `http://` without [`Self::allow_http`]; a region
    /// that is not 1 to 64 letters, digits, `-`, `_` or `.`; an access key
    /// id or session token that is not printable ASCII; an access key id
    /// without a secret or the reverse.
    pub fn to_builder(&self) -> Result<AmazonS3Builder> {
        validate_bucket(&self.bucket)?;
        validate_prefix(&self.prefix)?;
        if self.access_key_id.is_some() != self.secret_access_key.is_some() {
            return Err(Error::invalid_input(
                "an access key id needs a secret access key, and the reverse",
            ));
        }
        let client = http::client_options(self.request_timeout, self.connect_timeout);
        let retry = http::retry_config(self.http_retries, self.http_retry_timeout);
        // `with_client_options` replaces the whole ClientOptions, allow_http
        // included, so the client options go first and allow_http after.
        let mut builder = AmazonS3Builder::new()
            .with_client_options(client)
            .with_allow_http(self.allow_http)
            .with_bucket_name(&self.bucket)
            .with_virtual_hosted_style_request(self.virtual_hosted_style)
            .with_conditional_put(S3ConditionalPut::ETagMatch)
            .with_unsigned_payload(self.unsigned_payload)
            .with_retry(retry);
        if let Some(endpoint) = &self.endpoint {
            let allow = "allow_http, AWS_ALLOW_HTTP=true or --allow-http";
            let endpoint = http::endpoint("S3 endpoint", endpoint, self.allow_http, allow)?;
            builder = builder.with_endpoint(endpoint);
        }
        if let Some(region) = &self.region {
            http::name("S3 region", region)?;
            builder = builder.with_region(region);
        }
        if let Some(key) = &self.access_key_id {
            http::header_token("the S3 access key id", key)?;
            builder = builder.with_access_key_id(key);
        }
        if let Some(secret) = &self.secret_access_key {
            builder = builder.with_secret_access_key(secret);
        }
        if let Some(token) = &self.session_token {
            http::header_token("the S3 session token", token)?;
            builder = builder.with_token(token);
        }
        Ok(builder)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

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
}
