//! What the settings of every HTTP store (S3, Azure) share: checking the
//! values that end up in URLs and request headers, and the HTTP client and
//! retry options.
//!
//! object_store takes an endpoint, a region or a token as a plain string
//! and only uses it when it signs a request, where an unparsable URL or a
//! header value with a line break in it makes its signer panic. So each
//! such value is checked here, once, when the settings are built, and a bad
//! one is refused with [`ErrorKind::InvalidInput`](crate::ErrorKind::InvalidInput):
//! a configuration error that no retry will fix.

use std::time::Duration;

use object_store::{BackoffConfig, ClientOptions, RetryConfig};

use crate::error::{Error, ErrorKind, Result};

/// Checks an endpoint URL and returns it normalized (as the `url` crate
/// writes it, ASCII only, without a trailing `/`): `http` or `https`, a
/// host, an optional port and path, no credentials, query or fragment;
/// plain `http` only when `allow_http` is set. `setting` names the setting
/// in messages (`"S3 endpoint"`), `allow_flag` how to allow plain http.
pub(crate) fn endpoint(
    setting: &str,
    text: &str,
    allow_http: bool,
    allow_flag: &str,
) -> Result<String> {
    let bad = |why: &str| Error::invalid_input(format!("{setting} {text:?} {why}"));
    // The URL parser would drop line breaks and tabs silently: a value
    // that has them is refused instead.
    if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("has whitespace or a control character in it"));
    }
    if !text.contains("://") {
        return Err(bad(
            "is not a URL: it needs a scheme (http://host:port or https://host)",
        ));
    }
    let url = url::Url::parse(text).map_err(|e| {
        Error::new(
            ErrorKind::InvalidInput,
            format!("{setting} {text:?} is not a valid URL"),
        )
        .with_source(e)
    })?;
    match url.scheme() {
        "https" => {}
        "http" if allow_http => {}
        "http" => {
            return Err(bad(&format!(
                "is plain http; allow it explicitly ({allow_flag})"
            )));
        }
        _ => return Err(bad("is not an http(s) URL")),
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("has no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad("carries credentials; pass them as settings instead"));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("has a query or fragment"));
    }
    Ok(url.as_str().trim_end_matches('/').to_string())
}

/// Checks a value that goes into a request header as it is (a token, an
/// access key id): printable ASCII without spaces, not empty.
pub(crate) fn header_token(setting: &str, value: &str) -> Result<()> {
    if value.is_empty() || !value.chars().all(|c| c.is_ascii_graphic()) {
        return Err(Error::invalid_input(format!(
            "{setting} must be printable ASCII without spaces or line breaks"
        )));
    }
    Ok(())
}

/// Checks a name that goes into host names and signatures (a region, a
/// storage account): 1 to 64 ASCII letters, digits, `-`, `_` or `.`.
pub(crate) fn name(setting: &str, value: &str) -> Result<()> {
    let ok = (1..=64).contains(&value.len())
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !ok {
        return Err(Error::invalid_input(format!(
            "{setting} {value:?} is not valid (1 to 64 letters, digits, '-', '_' or '.')"
        )));
    }
    Ok(())
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
/// retry with a [`RetryPolicy`](crate::objects::RetryPolicy) that knows which
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_checked_and_normalized() {
        let ok =
            |text: &str, allow_http: bool| endpoint("endpoint", text, allow_http, "x").unwrap();
        assert_eq!(ok("http://127.0.0.1:8333", true), "http://127.0.0.1:8333");
        assert_eq!(
            ok("https://s3.example.com/", false),
            "https://s3.example.com"
        );
        assert_eq!(
            ok("HTTP://[::1]:9000/base/", true),
            "http://[::1]:9000/base"
        );
        assert_eq!(
            ok("https://bücher.example", false),
            "https://xn--bcher-kva.example"
        );
        for (bad, allow_http) in [
            ("", true),
            ("garbage", true),
            ("http://", true),
            ("http://127.0.0.1:99999", true),
            ("http://[::1", true),
            ("localhost:9000", true),
            ("127.0.0.1:9000", true),
            ("ftp://host", true),
            ("file:///tmp", true),
            ("http://host:8333", false),
            ("https://user:pw@host", false),
            ("https://host/?x=1", false),
            ("https://host/#f", false),
            ("https://ho st", false),
            ("https://host\n", false),
        ] {
            let err = endpoint("endpoint", bad, allow_http, "x").unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{bad:?}");
        }
    }

    #[test]
    fn header_values_and_names_are_checked() {
        header_token("token", "AbC+/=-_.~").unwrap();
        for bad in ["", "a b", "a\nb", "a\rb", "tab\t", "é"] {
            assert_eq!(
                header_token("token", bad).unwrap_err().kind(),
                ErrorKind::InvalidInput,
                "{bad:?}"
            );
        }
        name("region", "us-east-1").unwrap();
        name("region", "auto").unwrap();
        for bad in ["", "us east", "us\n", "a/b", "x?", &"a".repeat(65)] {
            assert_eq!(
                name("region", bad).unwrap_err().kind(),
                ErrorKind::InvalidInput,
                "{bad:?}"
            );
        }
    }
}
