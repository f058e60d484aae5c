//! Errors as answers: the status of the error's kind and the JSON body
//! that names it (`weft_api::fault`).

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use weft::{Error, ErrorKind};
use weft_api::fault::{ErrorBody, status_of};

/// A handler's error.
#[derive(Debug)]
pub struct ApiError {
    err: Error,
    status: Option<StatusCode>,
    retry_after_ms: Option<u64>,
}

/// A handler's answer.
pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    /// The answer for `err`, with the status of its kind.
    pub fn new(err: Error) -> Self {
        ApiError {
            err,
            status: None,
            retry_after_ms: None,
        }
    }

    /// Answers with `status` instead of the kind's (401 for a missing
    /// token).
    pub fn with_status(mut self, status: StatusCode) -> Self {
        self.status = Some(status);
        self
    }

    /// Adds a retry hint.
    pub fn retry_after(mut self, ms: u64) -> Self {
        self.retry_after_ms = Some(ms);
        self
    }

    /// The error's kind.
    pub fn kind(&self) -> ErrorKind {
        self.err.kind()
    }
}

impl From<Error> for ApiError {
    fn from(err: Error) -> Self {
        ApiError::new(err)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let kind = self.err.kind();
        let status = self.status.unwrap_or_else(|| {
            StatusCode::from_u16(status_of(kind)).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
        });
        // Unavailable is retryable by definition: always give a hint.
        let retry = self
            .retry_after_ms
            .or((kind == ErrorKind::Unavailable).then_some(100));
        let body = ErrorBody::of(&self.err, retry);
        let mut response = (status, Json(body)).into_response();
        if let Some(ms) = retry {
            let secs = ms.div_ceil(1000).max(1);
            if let Ok(v) = HeaderValue::from_str(&secs.to_string()) {
                response.headers_mut().insert(header::RETRY_AFTER, v);
            }
        }
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"weft\""),
            );
        }
        response.extensions_mut().insert(kind);
        response
    }
}

/// An `InvalidInput` answer for a request the framework could not parse
/// (bad JSON, a bad query or path parameter).
pub fn rejection(message: impl std::fmt::Display) -> ApiError {
    ApiError::new(Error::invalid_input(message.to_string()))
}
