//! Listening, TLS, the connection limit, and draining.
//!
//! axum-server serves both plain HTTP and TLS (rustls, from PEM files)
//! with one graceful-shutdown handle; the connection limit is an acceptor
//! wrapper. A connection over the limit is still accepted, up to as many
//! again, and each of its requests is answered `503 unavailable` with a
//! retry hint and `Connection: close` (see [`OverConnectionLimit`]), so a
//! client learns to come back later instead of meeting a reset it cannot
//! tell from a crash; past twice the limit a connection is closed at once,
//! which keeps the number of sockets the server holds bounded.

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
    let connections = Slots::new(options.limits.max_connections.max(1));
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

/// The connection slots: `served` for connections whose requests are
/// served, `shed` for those over the limit, whose requests are refused
/// with a retry hint.
#[derive(Clone)]
struct Slots {
    served: Arc<Semaphore>,
    shed: Arc<Semaphore>,
}

impl Slots {
    fn new(limit: usize) -> Self {
        Slots {
            served: Arc::new(Semaphore::new(limit)),
            shed: Arc::new(Semaphore::new(limit)),
        }
    }
}

/// Marks the requests of a connection accepted over the connection limit:
/// the request guard answers them `503 unavailable` with a retry hint and
/// closes the connection.
#[derive(Clone, Copy, Debug)]
pub struct OverConnectionLimit;

/// An acceptor that serves at most a fixed number of open connections.
#[derive(Clone)]
struct Limited<A> {
    inner: A,
    slots: Slots,
    shared: Arc<Shared>,
}

impl<A> Limited<A> {
    fn new(inner: A, slots: Slots, shared: Arc<Shared>) -> Self {
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
    /// Counted in the connections gauge (a served connection).
    counted: bool,
    shared: Arc<Shared>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if self.counted {
            self.shared
                .counters
                .connections
                .fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// A connection's service, holding its slot.
#[derive(Clone)]
struct Slotted<S> {
    inner: S,
    slot: Arc<Slot>,
}

impl<S, B> tower::Service<axum::http::Request<B>> for Slotted<S>
where
    S: tower::Service<axum::http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<std::result::Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: axum::http::Request<B>) -> Self::Future {
        if !self.slot.counted {
            request.extensions_mut().insert(OverConnectionLimit);
        }
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
        let permit = match Arc::clone(&self.slots.served).try_acquire_owned() {
            Ok(p) => Ok((p, true)),
            Err(_) => Arc::clone(&self.slots.shed)
                .try_acquire_owned()
                .map(|p| (p, false)),
        };
        let shared = self.shared.clone();
        let accepted = permit.map(|p| (p, self.inner.accept(stream, service)));
        Box::pin(async move {
            let Ok(((permit, counted), accepting)) = accepted else {
                return Err(io::Error::other(
                    "connection limit reached twice over: closed",
                ));
            };
            if counted {
                shared.counters.connections.fetch_add(1, Ordering::Relaxed);
            }
            let slot = Arc::new(Slot {
                _permit: permit,
                counted,
                shared,
            });
            let (stream, inner) = accepting.await?;
            Ok((stream, Slotted { inner, slot }))
        })
    }
}
