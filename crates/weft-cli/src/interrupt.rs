//! Stopping a command: SIGINT and SIGTERM, and bounded waits on the way
//! out.
//!
//! Every command is raced against [`interrupted`] (`weft tail` treats it
//! as its normal stop, the others end with [`INTERRUPTED`]), so a signal
//! ends the process within a moment whatever the store does: a paused
//! server, a lock wait, a slow rebuild. Cleanup after a stop is bounded by
//! [`CLOSE_BUDGET`]; what it leaves unfinished is what a killed process
//! leaves (a lease that expires, an index replayed from the log).

use std::future::Future;
use std::time::Duration;

/// The exit code of a command stopped by SIGINT or SIGTERM (128 + SIGINT,
/// as shells report it).
pub(crate) const INTERRUPTED: u8 = 130;

/// The longest a command waits for a handle to close once it has decided
/// to stop.
pub(crate) const CLOSE_BUDGET: Duration = Duration::from_millis(500);

/// Resolves on ctrl-c (SIGINT) or SIGTERM.
pub(crate) async fn interrupted() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    () = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => ctrl_c.await,
        }
    }
    #[cfg(not(unix))]
    ctrl_c.await;
}

/// Runs `work` for at most [`CLOSE_BUDGET`]; `None` when it did not finish
/// (it is dropped).
pub(crate) async fn bounded<T>(work: impl Future<Output = T>) -> Option<T> {
    tokio::select! {
        out = work => Some(out),
        () = weft::clock::sleep(CLOSE_BUDGET) => {
            tracing::debug!("cleanup cut off after {:?}", CLOSE_BUDGET);
            None
        }
    }
}
