//! The one place that decides what an object-store result means.
//!
//! Every caller that talks to a bucket (producer, replica, GC, KV objects)
//! asks [`classify`] what a result means and reacts to the [`Outcome`], never
//! to the raw `object_store::Error` or its message.
//!
//! | outcome            | typical cause                                   | reaction                    |
//! |--------------------|-------------------------------------------------|-----------------------------|
//! | `Committed`        | `Ok`                                            | done                        |
//! | `Conflict`         | 412, or `AlreadyExists` on a create-if-absent   | re-read, re-plan            |
//! | `Transient`        | 409 on a plain or `If-Match` put, 429, 5xx,     | retry with backoff          |
//! |                    | connect errors, errors before the request left  |                             |
//! | `Ambiguous`        | timeout / dropped connection after a write was  | re-read to learn whether    |
//! |                    | sent: it may have landed                        | it landed, then decide      |
//! | `NotFound`         | 404 (object or bucket), except on a delete      | caller decides              |
//! | `PermissionDenied` | 401/403 (wrong key, bad signature, no grant)    | fix credentials             |
//! | `Fatal`            | unsupported operation, invalid path, a bug      | stop                        |
//!
//! A delete whose object is already gone is `Committed`, on every store:
//! the goal of a delete is absence (see below).
//!
//! # What object_store 0.12 exposes, and what we do with it
//!
//! The S3 client maps the statuses it understands to dedicated error
//! variants: 404 → `NotFound`, 412 → `Precondition`, 409 → `AlreadyExists`,
//! 403 → `PermissionDenied`, 401 → `Unauthenticated`, 304 → `NotModified`.
//! A conditional create (`If-None-Match: *`) that loses is reported as
//! `AlreadyExists` (wrapping the 412), so `AlreadyExists` means "conflict" for
//! a create and "409, retry" for every other put; that is why [`classify`]
//! takes the [`StoreOp`] that produced the error.
//!
//! Every other failure arrives as `Generic` wrapping object_store's private
//! `RetryError`, whose type cannot be named outside the crate, so its status
//! code is not reachable through a structured field. What *is* public is
//! `object_store::client::HttpError` (with an `HttpErrorKind`) for
//! transport failures, which sits in the source chain of `Generic`; and
//! `std::io::Error` for some stores. [`classify`] walks the source chain for
//! those two. A `Generic` error with neither in its chain is therefore a
//! server answer with a status object_store did not map (5xx after its own
//! retries, 429, 400, a redirect), and is treated as transient: retries are
//! bounded by the caller's [`RetryPolicy`](super::RetryPolicy), so a 400 that
//! lands here costs a few retries and then surfaces as `Unavailable`.
//!
//! One more limitation of 0.12: list requests wrap even mapped statuses in
//! `Generic`, so a 403 on `list` classifies as transient, not as
//! `PermissionDenied`. Callers that need a clear credentials error probe with
//! a `get`/`head` first (the producer's open reads the manifest).
//!
//! No message string is ever inspected.
//!
//! # Where the stores differ, and how this module evens it out
//!
//! Measured against SeaweedFS (S3) and Azurite (Azure Blob) by
//! `tests/servers/s3_store.rs` and `tests/servers/azure_store.rs`:
//!
//! * **Lost conditional create.** S3 answers 412, which the S3 client turns
//!   into `AlreadyExists`; Azurite answers 409 `BlobAlreadyExists`
//!   (`AlreadyExists`), Azure itself may answer 412 (`Precondition`). All
//!   three are [`Outcome::Conflict`] for [`StoreOp::CreateIfAbsent`]. Only
//!   a 409 on a *non-create* put stays transient (on S3 it is a concurrent
//!   request on the same key).
//! * **Stale or missing `If-Match`.** Both answer 412, also when the object
//!   does not exist at all: [`Outcome::Conflict`], never `NotFound`.
//! * **Delete of a missing object.** S3 answers 204 (success), Azure and
//!   the local file store answer 404. [`classify`] calls that `Committed`
//!   for [`StoreOp::Delete`], [`settle`] turns it into `Ok(())`, and
//!   [`to_error`] keeps its kind `NotFound` for callers that convert first.
//! * **ETag spelling.** A put, get or head returns the ETag quoted
//!   (`"0x8D…"`); an Azure *list* returns it bare (`0x8D…`), while S3 lists
//!   keep the quotes. Compare ETags with [`etags_match`], never with `==`.
//!   Azurite accepts the bare spelling in `If-Match`.
//! * **ETags are not content hashes on Azure.** S3 (and SeaweedFS) use the
//!   MD5 of a single-part upload, so rewriting the same bytes keeps the
//!   ETag; Azure makes a new ETag for every write. To learn whether an
//!   ambiguous write landed, compare the bytes read back, not an ETag
//!   computed in advance.
//! * **Listing.** Both list in lexicographic order, after-offset and with
//!   delimiter alike, and show a write to the next list at once. A list
//!   with wrong credentials is `Generic` on both (see above), as is an
//!   Azure list of a missing container, so they classify as transient.
//! * **Missing bucket or container.** SeaweedFS creates a bucket on the
//!   first write to it; Azure answers 404 `ContainerNotFound`, which is
//!   [`Outcome::NotFound`] for reads and writes alike.

use std::error::Error as StdError;

// object_store's HTTP client exists only with a cloud feature; without one
// no request can fail in it, so there is nothing to look for.
#[cfg(any(feature = "aws", feature = "azure"))]
use object_store::client::{HttpError, HttpErrorKind};

use crate::error::{Error, ErrorKind, os};

/// The kind of request that produced a result; decides the few cases where
/// the same error means different things (a dropped connection on a read is
/// simply retried, on a write it may have landed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreOp {
    /// `get`, `head`, ranged reads.
    Read,
    /// An unconditional put (`PutMode::Overwrite`).
    Put,
    /// A conditional create (`PutMode::Create`, `If-None-Match: *`).
    CreateIfAbsent,
    /// A conditional update (`PutMode::Update`, `If-Match`).
    UpdateIfMatch,
    /// `delete`.
    Delete,
    /// `list`, `list_with_delimiter`.
    List,
}

impl StoreOp {
    /// True for requests that change the store.
    pub fn is_write(self) -> bool {
        matches!(
            self,
            StoreOp::Put | StoreOp::CreateIfAbsent | StoreOp::UpdateIfMatch | StoreOp::Delete
        )
    }

    /// A short lowercase name (for messages and metrics labels).
    pub fn as_str(self) -> &'static str {
        match self {
            StoreOp::Read => "read",
            StoreOp::Put => "put",
            StoreOp::CreateIfAbsent => "create",
            StoreOp::UpdateIfMatch => "update",
            StoreOp::Delete => "delete",
            StoreOp::List => "list",
        }
    }
}

/// What an object-store result means for the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The request succeeded.
    Committed,
    /// A precondition failed: someone else changed the object. Re-read and
    /// re-plan; nothing was written by this request.
    Conflict,
    /// A transient failure; nothing was written. Retry with backoff.
    Transient,
    /// No answer after the request was sent: the write may have landed.
    /// Resolve by re-reading, never by blindly writing again.
    Ambiguous,
    /// The object (or the bucket) does not exist.
    NotFound,
    /// The store refused the credentials or the operation.
    PermissionDenied,
    /// Retrying cannot help (unsupported operation, invalid path, a bug).
    Fatal,
}

impl Outcome {
    /// True when retrying the same request (after backoff) is the reaction.
    pub fn is_retryable(self) -> bool {
        matches!(self, Outcome::Transient)
    }
}

/// Classifies a result of a request of kind `op`.
pub fn classify_result<T>(op: StoreOp, result: &Result<T, object_store::Error>) -> Outcome {
    match result {
        Ok(_) => Outcome::Committed,
        Err(e) => classify(op, e),
    }
}

/// Classifies an error returned by a request of kind `op`.
pub fn classify(op: StoreOp, err: &object_store::Error) -> Outcome {
    match classify_error(op, err) {
        // The object a delete should remove is not there: S3 reports that as
        // success, Azure and local files as 404. Either way it is absent.
        Outcome::NotFound if op == StoreOp::Delete => Outcome::Committed,
        outcome => outcome,
    }
}

/// Turns an error that [`classify`] calls [`Outcome::Committed`] into
/// `Ok(())` — today only a delete of an object that is already gone — and
/// passes every other result through. Use it on deletes so that every store
/// answers alike:
///
/// ```no_run
/// # async fn gc(store: &dyn object_store::ObjectStore) -> Result<(), object_store::Error> {
/// use weft::objects::{StoreOp, settle};
/// let path = object_store::path::Path::from("segments/00000001");
/// settle(StoreOp::Delete, store.delete(&path).await)?;
/// # Ok(()) }
/// ```
pub fn settle(
    op: StoreOp,
    result: Result<(), object_store::Error>,
) -> Result<(), object_store::Error> {
    match result {
        Err(e) if classify(op, &e) == Outcome::Committed => Ok(()),
        other => other,
    }
}

/// The ETag without the spelling differences stores use for the same value:
/// surrounding double quotes (kept by get/head, dropped by Azure lists) and
/// the weak-validator prefix `W/`.
pub fn etag_value(etag: &str) -> &str {
    let etag = etag.trim();
    let etag = etag.strip_prefix("W/").unwrap_or(etag);
    etag.strip_prefix('"')
        .and_then(|e| e.strip_suffix('"'))
        .unwrap_or(etag)
}

/// True when two ETags name the same object version, whichever request
/// (put, get, head, list) and store they came from.
pub fn etags_match(a: &str, b: &str) -> bool {
    etag_value(a) == etag_value(b)
}

fn classify_error(op: StoreOp, err: &object_store::Error) -> Outcome {
    use object_store::Error as E;
    match err {
        E::Precondition { .. } => Outcome::Conflict,
        // A conditional create that lost (412 or 304, converted by the S3
        // client, or the in-memory/local stores' own check).
        E::AlreadyExists { .. } if op == StoreOp::CreateIfAbsent => Outcome::Conflict,
        // 409 on any other put: S3 answers it to concurrent `If-Match`
        // requests and to some in-flight operations on the same key.
        E::AlreadyExists { .. } => Outcome::Transient,
        // Only meaningful for conditional reads; for a conditional write it
        // is another spelling of "precondition failed".
        E::NotModified { .. } if op.is_write() => Outcome::Conflict,
        E::NotModified { .. } => Outcome::Committed,
        E::NotFound { .. } => Outcome::NotFound,
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => Outcome::PermissionDenied,
        E::NotSupported { .. }
        | E::NotImplemented
        | E::InvalidPath { .. }
        | E::UnknownConfigurationKey { .. } => Outcome::Fatal,
        // The spawned blocking task died (local store): the write may or
        // may not have run to completion.
        E::JoinError { .. } if op.is_write() => Outcome::Ambiguous,
        E::JoinError { .. } => Outcome::Transient,
        E::Generic { source, .. } => classify_chain(op, source.as_ref()),
        // object_store::Error is non-exhaustive; an unknown future variant is
        // treated as "we do not know what happened".
        _ if op.is_write() => Outcome::Ambiguous,
        _ => Outcome::Transient,
    }
}

/// Walks a `Generic` error's source chain for the structured transport
/// errors object_store and std expose.
fn classify_chain(op: StoreOp, source: &(dyn StdError + Send + Sync + 'static)) -> Outcome {
    let mut next: Option<&(dyn StdError + 'static)> = Some(source);
    while let Some(e) = next {
        // Cut off by weft's own deadline (any store).
        if let Some(cut) = e.downcast_ref::<DeadlinePassed>() {
            return if cut.sent() && op.is_write() {
                Outcome::Ambiguous
            } else {
                Outcome::Transient
            };
        }
        #[cfg(any(feature = "aws", feature = "azure"))]
        if let Some(http) = e.downcast_ref::<HttpError>() {
            return classify_http(op, http.kind());
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return classify_io(op, io);
        }
        if let Some(inner) = e.downcast_ref::<object_store::Error>() {
            return classify(op, inner);
        }
        next = e.source();
    }
    // An answered request with a status object_store did not map (5xx, 429,
    // 400, 3xx); see the module docs.
    Outcome::Transient
}

#[cfg(any(feature = "aws", feature = "azure"))]
fn classify_http(op: StoreOp, kind: HttpErrorKind) -> Outcome {
    match kind {
        // object_store documents both as "the request was not sent".
        HttpErrorKind::Connect | HttpErrorKind::Request => Outcome::Transient,
        HttpErrorKind::Timeout | HttpErrorKind::Interrupted if op.is_write() => Outcome::Ambiguous,
        HttpErrorKind::Timeout | HttpErrorKind::Interrupted => Outcome::Transient,
        // A response arrived but could not be read, or reqwest could not say
        // what went wrong: a write may well have been applied.
        _ if op.is_write() => Outcome::Ambiguous,
        _ => Outcome::Transient,
    }
}

/// An `io::Error` in a store client's error chain (local files, a socket),
/// classified by [`crate::error::os`] and read for what it means to `op`.
fn classify_io(op: StoreOp, err: &std::io::Error) -> Outcome {
    use crate::error::os::OsClass as C;
    match os::classify(err) {
        C::NotFound => Outcome::NotFound,
        // A read-only filesystem refuses every write, as a missing grant does.
        C::Permission | C::ReadOnlyFs => Outcome::PermissionDenied,
        C::Unreachable | C::Busy | C::NoSpace => Outcome::Transient,
        // The connection died with the request in flight.
        C::ConnectionLost | C::ShortRead | C::Interrupted if op.is_write() => Outcome::Ambiguous,
        C::ConnectionLost | C::ShortRead | C::Interrupted => Outcome::Transient,
        C::WrongPath | C::Unsupported => Outcome::Fatal,
        C::Exists if op == StoreOp::CreateIfAbsent => Outcome::Conflict,
        C::Exists | C::BadData | C::Failed if op.is_write() => Outcome::Ambiguous,
        C::Exists | C::BadData | C::Failed => Outcome::Transient,
    }
}

impl Outcome {
    /// The weft error kind a caller reports when it gives up on this outcome.
    pub fn error_kind(self) -> ErrorKind {
        match self {
            // Not an error; mapping it keeps the function total.
            Outcome::Committed => ErrorKind::Internal,
            Outcome::Conflict => ErrorKind::Conflict,
            Outcome::Transient => ErrorKind::Unavailable,
            Outcome::Ambiguous => ErrorKind::Indeterminate,
            Outcome::NotFound => ErrorKind::NotFound,
            Outcome::PermissionDenied => ErrorKind::PermissionDenied,
            Outcome::Fatal => ErrorKind::Internal,
        }
    }
}

/// The whole object at `path`: one GET, no retry, both the request's and
/// the body's errors converted by [`to_error`] (a missing object is
/// `NotFound`).
pub(crate) async fn read_whole(
    store: &dyn object_store::ObjectStore,
    path: &object_store::path::Path,
) -> Result<bytes::Bytes, Error> {
    let got = store
        .get(path)
        .await
        .map_err(|e| to_error(StoreOp::Read, path.as_ref(), e))?;
    got.bytes()
        .await
        .map_err(|e| to_error(StoreOp::Read, path.as_ref(), e))
}

/// Why an attempt was cut off (by [`super::retry`]'s deadline), in the
/// source chain of the error. [`classify`] reads it whatever the store (an HTTP client's or not): a
/// request that was sent and cut off is ambiguous for a write, one never
/// sent is transient.
#[derive(Debug)]
pub struct DeadlinePassed {
    pub(super) what: &'static str,
    pub(super) sent: bool,
}

impl DeadlinePassed {
    /// Whether the request had been sent when it was cut off (so a write
    /// may have landed).
    pub fn sent(&self) -> bool {
        self.sent
    }
}

impl std::fmt::Display for DeadlinePassed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the request {} before the operation's deadline",
            self.what
        )
    }
}

impl std::error::Error for DeadlinePassed {}

/// Converts an object-store error into weft's error, classified for `op` on
/// `path`. The original error is kept as the source.
pub fn to_error(op: StoreOp, path: &str, err: object_store::Error) -> Error {
    use object_store::Error as E;
    let outcome = classify(op, &err);
    let kind = match (&err, outcome) {
        // A read-only handle refused the write before it left.
        _ if super::readonly::is_read_only_refusal(&err) => ErrorKind::ReadOnly,
        (E::NotSupported { .. } | E::NotImplemented, _) => ErrorKind::Unsupported,
        (E::InvalidPath { .. } | E::UnknownConfigurationKey { .. }, _) => ErrorKind::InvalidInput,
        // A delete of a missing object is not a failure (see `settle`); a
        // caller that converts it anyway learns what happened.
        (E::NotFound { .. }, _) => ErrorKind::NotFound,
        (_, outcome) => outcome.error_kind(),
    };
    let what = match outcome {
        Outcome::Committed if op == StoreOp::Delete => "found nothing to delete",
        // A 304 on a conditional read: the copy the caller has is current.
        Outcome::Committed => "succeeded",
        Outcome::Conflict => "lost a precondition",
        Outcome::Transient => "failed transiently",
        Outcome::Ambiguous => "has an unknown outcome",
        Outcome::NotFound => "found nothing",
        Outcome::PermissionDenied => "was refused (check the credentials)",
        Outcome::Fatal => "failed",
    };
    Error::new(
        kind,
        format!("object store {} of {path} {what}", op.as_str()),
    )
    .with_source(err)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generic(source: impl StdError + Send + Sync + 'static) -> object_store::Error {
        object_store::Error::Generic {
            store: "test",
            source: Box::new(source),
        }
    }

    fn http(kind: HttpErrorKind) -> object_store::Error {
        generic(HttpError::new(
            kind,
            std::io::Error::other("transport failure"),
        ))
    }

    fn boxed(msg: &str) -> Box<dyn StdError + Send + Sync> {
        msg.to_string().into()
    }

    #[test]
    fn preconditions_are_conflicts() {
        let e = object_store::Error::Precondition {
            path: "m".into(),
            source: boxed("412"),
        };
        assert_eq!(classify(StoreOp::UpdateIfMatch, &e), Outcome::Conflict);
        assert_eq!(classify(StoreOp::CreateIfAbsent, &e), Outcome::Conflict);
    }

    #[test]
    fn already_exists_depends_on_the_operation() {
        let e = object_store::Error::AlreadyExists {
            path: "m".into(),
            source: boxed("exists"),
        };
        assert_eq!(classify(StoreOp::CreateIfAbsent, &e), Outcome::Conflict);
        assert_eq!(classify(StoreOp::UpdateIfMatch, &e), Outcome::Transient);
        assert_eq!(classify(StoreOp::Put, &e), Outcome::Transient);
    }

    #[test]
    fn credentials_and_missing_objects() {
        let denied = object_store::Error::PermissionDenied {
            path: "m".into(),
            source: boxed("403"),
        };
        let unauth = object_store::Error::Unauthenticated {
            path: "m".into(),
            source: boxed("401"),
        };
        let missing = object_store::Error::NotFound {
            path: "m".into(),
            source: boxed("404"),
        };
        assert_eq!(classify(StoreOp::Read, &denied), Outcome::PermissionDenied);
        assert_eq!(classify(StoreOp::Put, &unauth), Outcome::PermissionDenied);
        assert_eq!(classify(StoreOp::Read, &missing), Outcome::NotFound);
        let err = to_error(StoreOp::Read, "m", denied);
        assert_eq!(err.kind(), ErrorKind::PermissionDenied);
    }

    #[test]
    fn timeouts_are_ambiguous_only_for_writes() {
        for kind in [HttpErrorKind::Timeout, HttpErrorKind::Interrupted] {
            assert_eq!(classify(StoreOp::Put, &http(kind)), Outcome::Ambiguous);
            assert_eq!(
                classify(StoreOp::UpdateIfMatch, &http(kind)),
                Outcome::Ambiguous
            );
            assert_eq!(classify(StoreOp::Read, &http(kind)), Outcome::Transient);
        }
        let err = to_error(StoreOp::Put, "seg", http(HttpErrorKind::Timeout));
        assert_eq!(err.kind(), ErrorKind::Indeterminate);
    }

    #[test]
    fn unsent_requests_are_transient() {
        for kind in [HttpErrorKind::Connect, HttpErrorKind::Request] {
            assert_eq!(classify(StoreOp::Put, &http(kind)), Outcome::Transient);
        }
        let err = to_error(StoreOp::Read, "m", http(HttpErrorKind::Connect));
        assert_eq!(err.kind(), ErrorKind::Unavailable);
        assert!(err.kind().is_retryable());
    }

    #[test]
    fn io_errors_in_the_chain_are_found() {
        let reset = generic(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert_eq!(classify(StoreOp::Put, &reset), Outcome::Ambiguous);
        assert_eq!(classify(StoreOp::Read, &reset), Outcome::Transient);
        let refused = generic(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(classify(StoreOp::Put, &refused), Outcome::Transient);
    }

    /// OS errors a store client reports (the local file store, a socket),
    /// by errno, for a read and for a write, and the kind the caller gets.
    #[test]
    fn os_errors_in_the_chain_map_by_errno() {
        use Outcome as O;
        let table = [
            (libc::ENOENT, O::NotFound, O::NotFound, ErrorKind::NotFound),
            (
                libc::EACCES,
                O::PermissionDenied,
                O::PermissionDenied,
                ErrorKind::PermissionDenied,
            ),
            (
                libc::EPERM,
                O::PermissionDenied,
                O::PermissionDenied,
                ErrorKind::PermissionDenied,
            ),
            (
                libc::EROFS,
                O::PermissionDenied,
                O::PermissionDenied,
                ErrorKind::PermissionDenied,
            ),
            (
                libc::ENOSPC,
                O::Transient,
                O::Transient,
                ErrorKind::Unavailable,
            ),
            (
                libc::EDQUOT,
                O::Transient,
                O::Transient,
                ErrorKind::Unavailable,
            ),
            (
                libc::EMFILE,
                O::Transient,
                O::Transient,
                ErrorKind::Unavailable,
            ),
            (
                libc::ECONNREFUSED,
                O::Transient,
                O::Transient,
                ErrorKind::Unavailable,
            ),
            (
                libc::ECONNRESET,
                O::Transient,
                O::Ambiguous,
                ErrorKind::Indeterminate,
            ),
            (
                libc::EPIPE,
                O::Transient,
                O::Ambiguous,
                ErrorKind::Indeterminate,
            ),
            (
                libc::ETIMEDOUT,
                O::Transient,
                O::Ambiguous,
                ErrorKind::Indeterminate,
            ),
            (libc::ENOTDIR, O::Fatal, O::Fatal, ErrorKind::Internal),
            (libc::EISDIR, O::Fatal, O::Fatal, ErrorKind::Internal),
            (libc::EXDEV, O::Fatal, O::Fatal, ErrorKind::Internal),
            (
                libc::EIO,
                O::Transient,
                O::Ambiguous,
                ErrorKind::Indeterminate,
            ),
        ];
        for (errno, read, write, write_kind) in table {
            let err = || generic(std::io::Error::from_raw_os_error(errno));
            assert_eq!(classify(StoreOp::Read, &err()), read, "read, errno {errno}");
            assert_eq!(classify(StoreOp::Put, &err()), write, "put, errno {errno}");
            assert_eq!(
                to_error(StoreOp::Put, "x", err()).kind(),
                write_kind,
                "put, errno {errno}"
            );
        }
        let exists = || generic(std::io::Error::from_raw_os_error(libc::EEXIST));
        assert_eq!(classify(StoreOp::CreateIfAbsent, &exists()), O::Conflict);
        assert_eq!(classify(StoreOp::Put, &exists()), O::Ambiguous);
    }

    #[test]
    fn nested_object_store_errors_are_unwrapped() {
        let inner = object_store::Error::Precondition {
            path: "m".into(),
            source: boxed("412"),
        };
        assert_eq!(
            classify(StoreOp::UpdateIfMatch, &generic(inner)),
            Outcome::Conflict
        );
    }

    #[test]
    fn unmapped_statuses_are_transient_and_unsupported_is_fatal() {
        // What a 503 looks like from outside object_store: Generic with no
        // transport error in its chain.
        let e = generic(std::fmt::Error);
        assert_eq!(classify(StoreOp::UpdateIfMatch, &e), Outcome::Transient);
        assert_eq!(
            classify(StoreOp::Put, &object_store::Error::NotImplemented),
            Outcome::Fatal
        );
        let err = to_error(StoreOp::Put, "m", object_store::Error::NotImplemented);
        assert_eq!(err.kind(), ErrorKind::Unsupported);
    }

    #[test]
    fn deleting_a_missing_object_is_committed_on_every_store() {
        let missing = object_store::Error::NotFound {
            path: "m".into(),
            source: boxed("404"),
        };
        assert_eq!(classify(StoreOp::Delete, &missing), Outcome::Committed);
        assert_eq!(classify(StoreOp::Read, &missing), Outcome::NotFound);
        let local = generic(std::io::Error::from(std::io::ErrorKind::NotFound));
        assert_eq!(classify(StoreOp::Delete, &local), Outcome::Committed);

        assert!(settle(StoreOp::Delete, Err(missing)).is_ok());
        let denied = object_store::Error::PermissionDenied {
            path: "m".into(),
            source: boxed("403"),
        };
        let kept = settle(StoreOp::Delete, Err(denied)).unwrap_err();
        assert_eq!(classify(StoreOp::Delete, &kept), Outcome::PermissionDenied);
        let gone = object_store::Error::NotFound {
            path: "m".into(),
            source: boxed("404"),
        };
        assert!(
            settle(StoreOp::Read, Err(gone)).is_err(),
            "only deletes settle"
        );

        let err = to_error(
            StoreOp::Delete,
            "m",
            object_store::Error::NotFound {
                path: "m".into(),
                source: boxed("404"),
            },
        );
        assert_eq!(err.kind(), ErrorKind::NotFound);
    }

    #[test]
    fn etags_match_across_spellings() {
        assert!(etags_match("\"0x8DC1\"", "0x8DC1"));
        assert!(etags_match("0x8DC1", "\"0x8DC1\""));
        assert!(etags_match("W/\"abc\"", "\"abc\""));
        assert!(!etags_match("\"0x8DC1\"", "\"0x8DC2\""));
        assert!(
            !etags_match("\"abc", "abc"),
            "an unbalanced quote is part of the value"
        );
        assert_eq!(etag_value("\"\""), "");
    }

    #[test]
    fn ok_is_committed() {
        let ok: Result<(), object_store::Error> = Ok(());
        assert_eq!(classify_result(StoreOp::Put, &ok), Outcome::Committed);
    }

    #[tokio::test]
    async fn in_memory_conditional_puts_classify_as_conflicts() {
        use object_store::{ObjectStore, PutMode, PutOptions, UpdateVersion, memory::InMemory};
        let store = InMemory::new();
        let path = object_store::path::Path::from("m");
        let create = || PutOptions::from(PutMode::Create);
        let first = store.put_opts(&path, "a".into(), create()).await.unwrap();
        let again = store.put_opts(&path, "b".into(), create()).await;
        assert_eq!(
            classify_result(StoreOp::CreateIfAbsent, &again),
            Outcome::Conflict
        );
        let v1 = UpdateVersion::from(first);
        let second = store
            .put_opts(&path, "c".into(), PutMode::Update(v1.clone()).into())
            .await
            .unwrap();
        assert!(second.e_tag.is_some());
        let stale = store
            .put_opts(&path, "d".into(), PutMode::Update(v1).into())
            .await;
        assert_eq!(
            classify_result(StoreOp::UpdateIfMatch, &stale),
            Outcome::Conflict
        );
        let missing = store.get(&object_store::path::Path::from("nope")).await;
        assert_eq!(classify_result(StoreOp::Read, &missing), Outcome::NotFound);
    }
}
