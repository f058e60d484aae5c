//! The shop across two processes, for logs that many processes share (a
//! PostgreSQL log).
//!
//! The demo's own process is the customer and runs the `inventory`
//! executor; it starts a second `weft` process (`weft demo LOG --role
//! shipping`, the same binary) that runs the `shipping` executor on its
//! own handle of the same log. The two meet only through the log: shipping
//! folds the decisions inventory appended in the other process, and the
//! demo learns that everything shipped by reading the `shipments` stream.
//! The second process's lines are shown prefixed with `[shipping pid N]`.
//!
//! The second process runs until its stdin closes: the demo closes it when
//! every reserved order shipped (or when it fails or is killed), so no
//! process outlives the demo.

use std::process::Stdio;
use std::time::Duration;

use futures::StreamExt;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use weft::exec::{ExecutorEngine, ExecutorStatus};
use weft::{Error, ErrorKind, Log, Position, Result};

use super::shop::{Shipping, Tags};
use crate::output;

/// How long the shipping process gets to stop after its stdin closed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// The `shipping` executor in its own process, seen from the demo.
pub(super) struct ShippingProcess {
    child: Child,
    /// Held apart from `child`, whose `wait` would close it.
    stdin: Option<ChildStdin>,
    forward: tokio::task::JoinHandle<()>,
}

impl ShippingProcess {
    /// Starts `weft demo LOG --role shipping` and forwards its output.
    ///
    /// Errors: `Internal` when the process cannot be started.
    pub(super) fn start(log: &str) -> Result<ShippingProcess> {
        let exe = std::env::current_exe()
            .map_err(|e| Error::internal(format!("find the weft binary: {e}")))?;
        let mut child = Command::new(exe)
            .args(["demo", log, "--role", "shipping"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| Error::internal(format!("start the shipping process: {e}")))?;
        let pid = child.id().unwrap_or_default();
        let stdin = child.stdin.take();
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| Error::internal("the shipping process has no stdout"))?;
        let forward = tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if output::line(&format!("[shipping pid {pid}] {line}")).is_err() {
                    break;
                }
            }
        });
        Ok(ShippingProcess {
            child,
            stdin,
            forward,
        })
    }

    /// Waits until `shipped` orders are in the `shipments` stream, or the
    /// process stops first.
    ///
    /// Errors: `Internal` when the process exited; the log's read kinds.
    pub(super) async fn wait_shipped(
        &mut self,
        log: &Log,
        tags: &Tags,
        shipped: u64,
    ) -> Result<()> {
        let mut seen = 0u64;
        let mut shipments = log.subscribe(&tags.shipments, Position::Beginning);
        while seen < shipped {
            tokio::select! {
                next = shipments.next() => match next {
                    Some(entry) => {
                        entry?;
                        seen += 1;
                    }
                    None => return Err(Error::closed("the log closed while waiting for shipments")),
                },
                status = self.child.wait() => {
                    let status = status.map_err(|e| Error::internal(format!("wait for the shipping process: {e}")))?;
                    return Err(Error::internal(format!(
                        "the shipping process stopped early ({status}) after {seen} of {shipped} shipments"
                    )));
                }
            }
        }
        Ok(())
    }

    /// Closes the process's stdin and waits for it to stop (killing it
    /// after [`STOP_TIMEOUT`]).
    ///
    /// Errors: `Internal` when it failed or had to be killed.
    pub(super) async fn stop(mut self) -> Result<()> {
        drop(self.stdin.take());
        let status = match tokio::time::timeout(STOP_TIMEOUT, self.child.wait()).await {
            Ok(status) => status
                .map_err(|e| Error::internal(format!("wait for the shipping process: {e}")))?,
            Err(_) => {
                let _ = self.child.kill().await;
                return Err(Error::internal(format!(
                    "the shipping process did not stop within {STOP_TIMEOUT:?}"
                )));
            }
        };
        let _ = self.forward.await;
        if !status.success() {
            return Err(Error::internal(format!(
                "the shipping process failed ({status})"
            )));
        }
        Ok(())
    }
}

/// `weft demo LOG --role shipping`: runs the shipping executor on `log`
/// until stdin closes.
///
/// Errors: the executor's failure; the log's kinds.
pub(super) async fn run_shipping(log: &Log) -> Result<()> {
    let tags = Tags::new()?;
    let mut engine = ExecutorEngine::new(log.clone());
    let mut shipping = engine.register(Shipping { tags })?;
    let handle = engine.start()?;
    output::line(&format!(
        "shipping executor running in process {}",
        std::process::id()
    ))?;
    // Stdin closes when the demo is done with us (or is gone).
    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    let mut shipped = 0;
    loop {
        tokio::select! {
            line = stdin.next_line() => match line {
                Ok(Some(_)) => continue,
                _ => break,
            },
            state = shipping.wait_for(|s| s.state.shipped > shipped) => {
                let state = state?;
                shipped = state.state.shipped;
            }
        }
    }
    let finals = handle.shutdown().await;
    for (name, status) in finals {
        if let ExecutorStatus::Failed(why) = status {
            return Err(Error::new(
                ErrorKind::Internal,
                format!("executor {name} failed: {why}"),
            ));
        }
    }
    output::line(&format!(
        "shipping stopped: {shipped} shipped in this process's view"
    ))?;
    Ok(())
}
