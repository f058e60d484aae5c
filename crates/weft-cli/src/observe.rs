//! Observability of the command itself: `tracing` events on stderr
//! (`RUST_LOG`, else `--verbose`), and an optional Prometheus endpoint for
//! the long-running commands.

use std::net::SocketAddr;

use metrics_exporter_prometheus::PrometheusBuilder;
use tracing_subscriber::EnvFilter;
use weft::{Error, ErrorKind, Result};

/// Sends tracing events to stderr. `RUST_LOG` wins when set; otherwise
/// weft's own warnings (one line when a store or directory starts failing,
/// one when it recovers, with the count: retries in between are debug
/// events) and only errors of the libraries underneath, so an outage never
/// floods stderr; `-v` adds weft's debug events, `-vv` its trace.
pub(crate) fn init_tracing(verbose: u8) {
    let filter = match std::env::var("RUST_LOG") {
        Ok(spec) if !spec.trim().is_empty() => EnvFilter::new(spec),
        _ => EnvFilter::new(match verbose {
            0 => "error,weft=warn,weft_cli=warn",
            1 => "warn,weft=debug,weft_cli=debug",
            _ => "info,weft=trace,weft_cli=trace",
        }),
    };
    // A second init (never done here) would be the only failure.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}

/// Serves Prometheus metrics on `addr` (and only there) until the process
/// ends; every `metrics` counter and gauge recorded by weft or the command
/// shows up at `http://addr/metrics`.
///
/// Errors: `InvalidInput` when the endpoint cannot be bound (address in
/// use, not local).
pub(crate) fn serve_metrics(addr: SocketAddr) -> Result<()> {
    // Bind first, so that a taken port is an error of this command instead
    // of a failure inside the exporter's background task.
    std::net::TcpListener::bind(addr).map_err(|e| {
        Error::new(
            ErrorKind::InvalidInput,
            format!("cannot serve metrics on {addr}: {e}"),
        )
    })?;
    PrometheusBuilder::new()
        .with_http_listener(addr)
        .install()
        .map_err(|e| {
            Error::new(
                ErrorKind::InvalidInput,
                format!("cannot serve metrics on {addr}"),
            )
            .with_source(e)
        })?;
    tracing::info!(%addr, "serving Prometheus metrics");
    Ok(())
}
