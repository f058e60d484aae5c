//! Listening, TLS, the connection limit, and draining.
//!
//! axum-server serves both plain HTTP and TLS (rustls, from PEM files)
//! with one graceful-shutdown handle; the connection limit is an acceptor
//! wrapper that refuses a connection over the limit at once.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use axum_server::Handle;
use axum_server::accept::{Accept, DefaultAcceptor};
use axum_server::tls_rustls::{RustlsAcceptor, RustlsConfig};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinHandle;
use weft::{Error, ErrorKind, Result};

use crate::routes::router;
use crate::state::Shared;

/// A running server.
pub struct Running {
    /// Where it listens.
    pub local_addr: SocketAddr,
    /// Its state (the log, counters).
    pub shared: Arc<Shared>,
    handle: Handle,
    task: JoinHandle<io::Result<()>>,
    tls: bool,
}

impl Running {
    /// The server's base URL (`http://127.0.0.1:PORT`).
    pub fn url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.local_addr)
    }

    /// Drains: stops accepting, ends subscriptions and sessions (their
    /// in-flight appends are answered first), waits for requests in flight
    /// up to the drain timeout, then closes the log.
    ///
    /// Errors: the log's close kinds.
    pub async fn shutdown(self) -> Result<()> {
        self.shared.begin_shutdown();
        self.handle
            .graceful_shutdown(Some(self.shared.options.limits.drain_timeout));
        match self.task.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "the listener failed while draining"),
            Err(e) => tracing::warn!(error = %e, "the server task failed"),
        }
        self.shared.log().close().await
    }

    /// Resolves when the server stopped on its own (its listener failed).
    pub async fn stopped(&mut self) -> io::Result<()> {
        (&mut self.task)
            .await
            .unwrap_or_else(|e| Err(io::Error::other(e)))
    }
}

/// Serves `shared`'s log on its options' address until
/// [`Running::shutdown`].
///
/// Errors: `InvalidInput` when the address cannot be bound (in use, not
/// local) or the TLS files cannot be read; `Unavailable` for other
/// listener failures.
pub async fn serve(shared: Arc<Shared>) -> Result<Running> {
    if let Err(e) = rustls::crypto::ring::default_provider().install_default() {
        // Already installed (a second server in this process): fine.
        let _ = e;
    }
    let options = shared.options.clone();
    let listener = std::net::TcpListener::bind(options.listen).map_err(|e| {
        Error::new(
            ErrorKind::InvalidInput,
            format!("cannot listen on {}: {e}", options.listen),
        )
        .with_source(e)
    })?;
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::io("set the listener non-blocking", e))?;
    let local_addr = listener
        .local_addr()
        .map_err(|e| Error::io("read the listener's address", e))?;
    let handle = Handle::new();
    let app = router(shared.clone()).into_make_service_with_connect_info::<SocketAddr>();
    let connections = Arc::new(Semaphore::new(options.limits.max_connections.max(1)));
    let task = match &options.tls {
        None => {
            let acceptor = Limited::new(DefaultAcceptor::new(), connections, shared.clone());
            let server = axum_server::from_tcp(listener)
                .acceptor(acceptor)
                .handle(handle.clone());
            tokio::spawn(async move { server.serve(app).await })
        }
        Some(files) => {
            let config = RustlsConfig::from_pem_file(&files.cert, &files.key)
                .await
                .map_err(|e| {
                    Error::new(
                        ErrorKind::InvalidInput,
                        format!(
                            "cannot load the TLS certificate {} and key {}: {e}",
                            files.cert.display(),
                            files.key.display()
                        ),
                    )
                    .with_source(e)
                })?;
            let acceptor = Limited::new(RustlsAcceptor::new(config), connections, shared.clone());
            let server = axum_server::from_tcp(listener)
                .acceptor(acceptor)
                .handle(handle.clone());
            tokio::spawn(async move { server.serve(app).await })
        }
    };
    Ok(Running {
        local_addr,
        shared,
        handle,
        task,
        tls: options.tls.is_some(),
    })
}

/// An acceptor that admits at most a fixed number of open connections.
#[derive(Clone)]
struct Limited<A> {
    inner: A,
    slots: Arc<Semaphore>,
    shared: Arc<Shared>,
}

impl<A> Limited<A> {
    fn new(inner: A, slots: Arc<Semaphore>, shared: Arc<Shared>) -> Self {
        Limited {
            inner,
            slots,
            shared,
        }
    }
}

/// Held by a connection's service for as long as the connection lives.
struct Slot {
    _permit: OwnedSemaphorePermit,
    shared: Arc<Shared>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.shared
            .counters
            .connections
            .fetch_sub(1, Ordering::Relaxed);
    }
}

/// A connection's service, holding its slot.
#[derive(Clone)]
struct Slotted<S> {
    inner: S,
    _slot: Arc<Slot>,
}

impl<S, R> tower::Service<R> for Slotted<S>
where
    S: tower::Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<std::result::Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        self.inner.call(request)
    }
}

impl<I, S, A> Accept<I, S> for Limited<A>
where
    A: Accept<I, S> + Clone + Send + 'static,
    A::Future: Send + 'static,
    I: Send + 'static,
    S: Send + 'static,
{
    type Stream = A::Stream;
    type Service = Slotted<A::Service>;
    type Future =
        Pin<Box<dyn Future<Output = io::Result<(Self::Stream, Self::Service)>> + Send + 'static>>;

    fn accept(&self, stream: I, service: S) -> Self::Future {
        let permit = Arc::clone(&self.slots).try_acquire_owned();
        let shared = self.shared.clone();
        let accepted = permit.map(|p| (p, self.inner.accept(stream, service)));
        Box::pin(async move {
            let Ok((permit, accepting)) = accepted else {
                return Err(io::Error::other("connection limit reached"));
            };
            shared.counters.connections.fetch_add(1, Ordering::Relaxed);
            let slot = Arc::new(Slot {
                _permit: permit,
                shared,
            });
            let (stream, inner) = accepting.await?;
            Ok((stream, Slotted { inner, _slot: slot }))
        })
    }
}
