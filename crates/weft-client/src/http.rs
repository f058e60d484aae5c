//! Requests to the server: endpoints, tokens, retries, and turning
//! answers into weft's errors.
//!
//! The error of a non-2xx answer is rebuilt from its JSON body
//! (`weft_api::fault`), kind and detail, so a caller sees the error the
//! server's log returned. Transport failures are classified here, once:
//! a request that was never sent (refused connection) is `Unavailable`
//! and retried; a write whose connection broke after it was sent is
//! `Indeterminate` (its outcome is unknown: retry with its append id); a
//! read that broke is retried.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

pub use reqwest::Method;
use reqwest::{Response, Url};
use serde::Serialize;
use serde::de::DeserializeOwned;
use weft::{Error, ErrorKind, Result};
use weft_api::fault::{ErrorBody, kind_of_status};

use crate::options::RemoteOptions;

/// Whether a request changes the log (decides what a broken connection
/// means).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// A read: safe to repeat.
    Read,
    /// A write: repeating it is safe only with an append id (or when it
    /// was never sent).
    Write,
}

/// The server(s) a client talks to.
pub struct Api {
    client: reqwest::Client,
    endpoints: Vec<Url>,
    active: AtomicUsize,
    token: Option<String>,
    options: RemoteOptions,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("endpoints", &self.endpoints)
            .finish()
    }
}

/// Parses `http://host:port[,http://other:port...]`.
///
/// Errors: `InvalidInput` for an empty list, a URL that does not parse, or
/// a scheme other than http and https.
pub fn endpoints(text: &str) -> Result<Vec<Url>> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let url = Url::parse(part)
            .map_err(|e| Error::invalid_input(format!("server address {part:?}: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            return Err(Error::invalid_input(format!(
                "server address {part:?}: use http://HOST:PORT or https://HOST:PORT"
            )));
        }
        out.push(url);
    }
    if out.is_empty() {
        return Err(Error::invalid_input("no server address given"));
    }
    Ok(out)
}

impl Api {
    /// A client of the servers at `text`.
    ///
    /// Errors: `InvalidInput` for bad addresses or a bad CA certificate.
    pub fn new(text: &str, options: &RemoteOptions) -> Result<Api> {
        let endpoints = endpoints(text)?;
        let mut builder = reqwest::Client::builder()
            .connect_timeout(options.connect_timeout)
            .tcp_nodelay(true)
            .pool_max_idle_per_host(64);
        if let Some(pem) = &options.ca_pem {
            let certs = reqwest::Certificate::from_pem_bundle(pem)
                .map_err(|e| Error::invalid_input(format!("CA certificate: {e}")))?;
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        let client = builder
            .build()
            .map_err(|e| Error::invalid_input(format!("HTTP client: {e}")))?;
        Ok(Api {
            client,
            endpoints,
            active: AtomicUsize::new(0),
            token: options.token.clone(),
            options: options.clone(),
        })
    }

    /// The options this client was made with.
    pub fn options(&self) -> &RemoteOptions {
        &self.options
    }

    /// The URL of `segments` (each percent-encoded) on the active endpoint.
    pub fn url(&self, segments: &[&str], query: &[(&str, String)]) -> Url {
        let i = self.active.load(Ordering::Relaxed) % self.endpoints.len();
        let mut url = self.endpoints[i].clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        if !query.is_empty() {
            url.query_pairs_mut()
                .extend_pairs(query.iter().map(|(k, v)| (*k, v.as_str())));
        }
        url
    }

    /// A request builder with the token set.
    pub fn request(&self, method: Method, url: Url) -> reqwest::RequestBuilder {
        let builder = self.client.request(method, url);
        match &self.token {
            Some(token) => builder.bearer_auth(token),
            None => builder,
        }
    }

    fn rotate(&self, from: usize) {
        // Only the first caller that saw `from` fail moves on.
        let _ = self.active.compare_exchange(
            from,
            (from + 1) % self.endpoints.len(),
            Ordering::Relaxed,
            Ordering::Relaxed,
        );
    }

    /// Sends a request and decodes its JSON answer, retrying (on the next
    /// endpoint, when there are several) what is safe to retry, for up to
    /// [`RemoteOptions::retry_for`].
    ///
    /// Errors: the server's error for the request; `Unavailable` when no
    /// server answered in time; `Indeterminate` for a write whose
    /// connection broke after it was sent.
    pub async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        segments: &[&str],
        query: &[(&str, String)],
        body: Option<&(impl Serialize + ?Sized)>,
        effect: Effect,
    ) -> Result<T> {
        let started = weft::clock::monotonic_now();
        let mut pause = Duration::from_millis(20);
        loop {
            let at = self.active.load(Ordering::Relaxed);
            let mut request = self
                .request(method.clone(), self.url(segments, query))
                .timeout(self.options.request_timeout);
            if let Some(body) = body {
                request = request.json(body);
            }
            let err = match request.send().await {
                Ok(response) if response.status().is_success() => {
                    return match response.json::<T>().await {
                        Ok(value) => Ok(value),
                        Err(e) => Err(transport(e, effect)),
                    };
                }
                Ok(response) => error_of(response).await,
                Err(e) => transport(e, effect),
            };
            let retry = match err.kind() {
                ErrorKind::Unavailable => true,
                // A follower refused a write: the leader is elsewhere.
                ErrorKind::ReadOnly => self.endpoints.len() > 1,
                _ => false,
            };
            if !retry || started.elapsed() >= self.options.retry_for {
                return Err(err);
            }
            if self.endpoints.len() > 1 {
                self.rotate(at);
            }
            tracing::debug!(error = %err, "retrying a request to the weft server");
            weft::clock::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(500));
        }
    }
}

/// The error a non-2xx answer carries.
pub async fn error_of(response: Response) -> Error {
    let status = response.status().as_u16();
    match response.json::<ErrorBody>().await {
        Ok(body) => body.into_error(),
        Err(_) => Error::new(
            kind_of_status(status),
            format!("the server answered {status} without an error body"),
        ),
    }
}

/// What a transport failure means for a request with `effect`.
pub fn transport(e: reqwest::Error, effect: Effect) -> Error {
    let kind = if e.is_connect() || effect == Effect::Read {
        ErrorKind::Unavailable
    } else {
        ErrorKind::Indeterminate
    };
    let what = match kind {
        ErrorKind::Indeterminate => {
            "the connection to the server broke after the write was sent; it may have taken effect (retry with its append id)"
        }
        _ => "the server could not be reached",
    };
    Error::new(kind, what).with_source(e)
}
