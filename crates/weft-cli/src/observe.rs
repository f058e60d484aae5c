//! Observability of the command itself: `tracing` events on stderr
//! (`RUST_LOG`, else `--verbose`), and an optional Prometheus endpoint for
//! the long-running commands.

use std::io::IsTerminal;
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
        _ => {
            let filter = EnvFilter::new(match verbose {
                0 => "error,weft=warn,weft_cli=warn,weft_server=info",
                1 => "warn,weft=debug,weft_cli=debug",
                _ => "info,weft=trace,weft_cli=trace",
            });
            // A command meets a broken history in the read that needs it
            // and ends with that error as its one line; the background
            // fill's warning about the same damage would be a second line,
            // printed or not depending on which of the two came first.
            // `-v` (or RUST_LOG) shows it.
            match history_fill_directive() {
                Some(mute) if verbose == 0 => filter.add_directive(mute),
                _ => filter,
            }
        }
    };
    // A second init (never done here) would be the only failure.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only for a person at a terminal, never into a file
        // or a pipe another program reads.
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .try_init();
}

/// The directive that mutes the history fill's warning (its errors reach
/// the command through its reads).
fn history_fill_directive() -> Option<tracing_subscriber::filter::Directive> {
    format!("{}=error", weft::HISTORY_FILL_LOG_TARGET)
        .parse()
        .ok()
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

#[cfg(test)]
mod tests {
    #[test]
    fn the_history_fill_directive_names_the_library_target() {
        let directive = super::history_fill_directive().expect("a valid directive");
        assert_eq!(
            directive.to_string(),
            format!("{}=error", weft::HISTORY_FILL_LOG_TARGET)
        );
    }
}
