//! `weft serve`: the log behind the network API (crate `weft-server`).
//!
//! One process serves one log. A dir log is locked by it (a second
//! `weft serve` of the same directory fails with `Locked`). A bucket log
//! is served by whichever `weft serve` holds its writer lease; another
//! started on the same bucket is a standby: it serves reads as a follower,
//! answers writes `read_only`, and takes the log over when the leader's
//! lease lapses. SIGTERM or SIGINT drains (in-flight requests are
//! answered, subscriptions end) and closes the log; the exit code is 0.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use weft::connect::Location;
use weft::storage::bucket::{BucketOptions, BucketStorage};
use weft::{ErrorKind, Log, Result};
use weft_server::state::Current;
use weft_server::{Limits, Role, ServerOptions, Shared, TlsFiles, Tokens};

use crate::location::{self, Create, StoreArgs};
use crate::output;

/// The long help of `weft serve`.
const SERVE_HELP: &str = "\
Serves LOG over HTTP on --listen (default 127.0.0.1:7070; a wider address only when given).

LOG is a directory, s3://bucket/prefix, az://container/prefix, postgres://USER@HOST/DB?log=NAME,
or memory: (an in-memory log, gone when the server stops: for trying it out).

The API (JSON; payloads base64 in `data`; described in openapi.yaml and docs/SERVER.md):
  POST /v1/append                 one entry or an atomic batch; `condition` on a stream's version; `id` (exactly once)
  GET  /v1/entries?from=&limit=   a page of the log (`tag=` for one tag); /v1/entries/{seqnum}; /v1/entries/prev?before=
  GET  /v1/streams, /v1/streams/{tag}, /v1/streams/{tag}/entries?from_version=
  GET  /v1/tip, /v1/status        the live range; backend, role (leader|follower), lease, counters
  GET  /v1/subscribe?from=        server-sent events, backlog then live; resumes after Last-Event-ID
  GET  /v1/session                WebSocket: pipelined appends, answered in order
  /v1/kv/{scope}/{key}            GET, PUT, DELETE; POST .../cas and .../increment
  POST /v1/trim                   drop entries through a seqnum (admin)
  GET  /healthz, /readyz          liveness; readiness with the role (?role=leader: 200 only on the leader)
  GET  /metrics                   Prometheus text
  GET  /                          the web console

Errors: every non-2xx answer is {\"error\": {\"kind\", \"message\", \"retry_after_ms\"}}; the kind picks the
status (invalid_input 400, permission_denied 401/403, not_found 404, conflict 409, fenced 410, trimmed 416,
read_only 421, locked 423, corrupt/internal 500, unsupported 501, closed 502, unavailable 503 with
Retry-After, indeterminate 504: retry with the append id).

Security: with --tokens-file or $WEFT_TOKENS (lines or `;`-separated items `TOKEN SCOPE[,SCOPE]`, scopes
read, append, admin) every route but /, /console, /healthz and /readyz needs `Authorization: Bearer TOKEN`
(or ?access_token=). --tls-cert and --tls-key (PEM) serve HTTPS.

Limits: bodies (--max-body-bytes), open connections (--max-connections), requests in flight
(--max-requests) and request bytes in flight (--max-in-flight-bytes); over a limit a request gets 503
`unavailable` with a retry hint (a body over --max-body-bytes is 400 `invalid_input`). Each request has a
deadline (--request-timeout).

Failover (bucket logs): start `weft serve s3://...` on two hosts; one takes the writer lease and appends,
the other serves reads and takes over when the lease lapses (--lease-renew-secs sets the period; the
standby waits up to three). Clients given both addresses (http://a:7070,http://b:7070) follow the leader;
appends retried with their ids are written once.

Logs: one line per request on stderr (target weft_server::request: method, path, status, kind, micros);
RUST_LOG filters them. SIGTERM or SIGINT drains in-flight requests, closes the log and exits 0.";

/// Arguments of `weft serve`.
#[derive(Debug, Args)]
#[command(long_about = SERVE_HELP)]
pub(crate) struct ServeArgs {
    /// The log: a directory, s3://, az://, postgres://, or memory:.
    log: String,

    /// Address to listen on (port 0: any free port, printed on stdout).
    #[arg(long, default_value = "127.0.0.1:7070")]
    listen: SocketAddr,

    /// Create the log when it does not exist.
    #[arg(long)]
    create: bool,

    /// Bearer tokens with scopes, one `TOKEN SCOPE[,SCOPE...]` per line
    /// ($WEFT_TOKENS holds the same, `;`-separated, when no file is given).
    #[arg(long, value_name = "FILE")]
    tokens_file: Option<PathBuf>,

    /// The TLS certificate chain, PEM (with --tls-key: serve HTTPS).
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    tls_cert: Option<PathBuf>,

    /// The TLS private key, PEM.
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_key: Option<PathBuf>,

    /// The largest request body, in bytes.
    #[arg(long, value_name = "BYTES")]
    max_body_bytes: Option<usize>,

    /// Open connections at most (more are closed at once).
    #[arg(long, value_name = "N")]
    max_connections: Option<usize>,

    /// Requests served at once (more get 503 with a retry hint).
    #[arg(long, value_name = "N")]
    max_requests: Option<usize>,

    /// Request body bytes being processed at once.
    #[arg(long, value_name = "BYTES")]
    max_in_flight_bytes: Option<usize>,

    /// How long one request may take, in seconds (a write past it is
    /// answered `indeterminate`).
    #[arg(long, value_name = "SECS", value_parser = crate::seconds::parse_deadline)]
    request_timeout: Option<Duration>,

    /// How often the writer of a bucket log renews its lease, in seconds;
    /// a standby takes over within about three periods of the leader's
    /// death.
    #[arg(long, value_name = "SECS", default_value = "5", value_parser = crate::seconds::parse_deadline)]
    lease_renew_secs: Duration,

    /// The URL clients reach this server at, named in its writer lease so
    /// a standby can point writers at it.
    #[arg(long, value_name = "URL")]
    advertise: Option<String>,
}

/// What `weft serve` opened.
struct Opened {
    log: Log,
    role: Role,
    backend: &'static str,
    /// For a standby: how to become the leader.
    standby: Option<Standby>,
}

/// A standby's way to the writer.
struct Standby {
    location: Location,
    options: BucketOptions,
    store: StoreArgs,
}

/// Runs `weft serve`.
pub(crate) async fn run(args: ServeArgs, store: &StoreArgs) -> Result<ExitCode> {
    let tokens = match (&args.tokens_file, std::env::var("WEFT_TOKENS")) {
        (Some(file), _) => Some(Tokens::from_file(file)?),
        (None, Ok(text)) if !text.trim().is_empty() => Some(Tokens::parse(&text)?),
        _ => None,
    };
    let mut limits = Limits::default();
    limits.max_body_bytes = args.max_body_bytes.unwrap_or(limits.max_body_bytes);
    limits.max_connections = args.max_connections.unwrap_or(limits.max_connections);
    limits.max_requests = args.max_requests.unwrap_or(limits.max_requests);
    limits.max_in_flight_bytes = args
        .max_in_flight_bytes
        .unwrap_or(limits.max_in_flight_bytes);
    limits.request_timeout = args.request_timeout.unwrap_or(limits.request_timeout);
    let options = ServerOptions {
        listen: args.listen,
        tokens,
        tls: match (&args.tls_cert, &args.tls_key) {
            (Some(cert), Some(key)) => Some(TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
            }),
            _ => None,
        },
        limits,
    };
    let opened = open(&args, store).await?;
    let shared = Shared::new(opened.log, opened.role, opened.backend, options);
    if let Ok(handle) = metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder() {
        shared.set_extra_metrics(move || handle.render());
    }
    let running = match weft_server::serve(shared.clone()).await {
        Ok(running) => running,
        Err(e) => {
            let _ = shared.log().close().await;
            return Err(e);
        }
    };
    output::line(&format!(
        "weft serve: listening on {} ({} log, {})",
        running.url(),
        opened.backend,
        opened.role.as_str()
    ))?;
    let takeover = opened
        .standby
        .map(|standby| tokio::spawn(take_over_when_free(shared.clone(), standby)));
    let mut running = running;
    tokio::select! {
        () = crate::interrupt::interrupted() => {}
        stopped = running.stopped() => {
            if let Some(t) = takeover { t.abort(); }
            let e = stopped.err().unwrap_or_else(|| std::io::Error::other("the listener stopped"));
            return Err(weft::Error::io("serve", e));
        }
    }
    if let Some(t) = takeover {
        t.abort();
    }
    tracing::info!("draining");
    running.shutdown().await?;
    Ok(ExitCode::SUCCESS)
}

/// Opens the log `args.log` names, as the leader or (a bucket log whose
/// lease a live writer holds) as a standby follower.
async fn open(args: &ServeArgs, store: &StoreArgs) -> Result<Opened> {
    let text = args.log.trim();
    let create = if args.create {
        Create::IfMissing
    } else {
        Create::No
    };
    let leader = |log, backend| Opened {
        log,
        role: Role::Leader,
        backend,
        standby: None,
    };
    if text == "memory:" || text == "memory://" {
        return Ok(leader(Log::memory(), "memory"));
    }
    if let Some(pg) = crate::pg::location(text) {
        return Ok(leader(
            Log::new(crate::pg::open(pg?, create).await?),
            "postgres",
        ));
    }
    let location = location::parse(text)?;
    let backend = match &location {
        Location::S3 { .. } => "s3",
        Location::Azure { .. } => "az",
        Location::Dir { .. } => {
            return Ok(leader(
                location::open_log(&location, create, false, store).await?,
                "dir",
            ));
        }
        _ => return Err(location::not_yet(&location)),
    };
    let options = BucketOptions::default()
        .with_retry(store.retry())
        .with_writer_name(Some(
            args.advertise
                .clone()
                .unwrap_or_else(|| format!("weft serve on {}", args.listen)),
        ))
        .with_lease_renew_every(args.lease_renew_secs);
    let bucket = location::open_store(&location, store)?;
    match BucketStorage::open(bucket, "", options.clone()).await {
        Ok(writer) => Ok(leader(Log::new(writer), backend)),
        Err(e) if e.kind() == ErrorKind::Locked => {
            tracing::info!(error = %e, "another writer holds the log; serving as a standby follower");
            let followed = location::follow(&location, store, Duration::from_millis(200)).await?;
            Ok(Opened {
                log: followed.log.clone(),
                role: Role::Follower,
                backend,
                standby: Some(Standby {
                    location,
                    options,
                    store: store.clone(),
                }),
            })
        }
        Err(e) => Err(e),
    }
}

/// A standby's loop: tries to open the writer (each try watches the
/// lease for up to three renewal periods and fails with `Locked` while the
/// leader renews it); once it opens, this server leads.
async fn take_over_when_free(shared: Arc<Shared>, standby: Standby) {
    loop {
        let bucket = match location::open_store(&standby.location, &standby.store) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = %e, "standby: cannot reach the bucket");
                weft::clock::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        match BucketStorage::open(bucket, "", standby.options.clone()).await {
            Ok(writer) => {
                let follower = shared.log();
                shared.replace(Current {
                    log: Log::new(writer),
                    role: Role::Leader,
                    leader: None,
                    lease_holder: None,
                });
                let _ = follower.close().await;
                tracing::warn!("standby: took the log over; this server leads now");
                return;
            }
            Err(e) if e.kind() == ErrorKind::Locked => {
                tracing::debug!(error = %e, "standby: the leader is alive");
            }
            Err(e) => {
                tracing::warn!(error = %e, "standby: opening the writer failed");
                weft::clock::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}
