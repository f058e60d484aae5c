//! The counters `/metrics` shows, in the Prometheus text format.
//!
//! The server keeps its own counters (atomics, no global recorder), so
//! several servers in one process (tests) each show their own; the command
//! appends its global recorder's text (weft's storage metrics).

use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use weft::ErrorKind;
use weft_api::fault::KINDS;

/// The server's counters and gauges.
#[derive(Debug, Default)]
pub struct Counters {
    /// Requests answered.
    pub requests: AtomicU64,
    /// Entries appended (over HTTP and sessions).
    pub appended_entries: AtomicU64,
    /// Append requests (HTTP and session messages).
    pub append_requests: AtomicU64,
    /// Requests shed by a limit.
    pub shed: AtomicU64,
    /// Entries sent to subscribers.
    pub delivered: AtomicU64,
    /// Open subscriptions.
    pub subscribers: AtomicI64,
    /// Open sessions.
    pub sessions: AtomicI64,
    /// Open connections.
    pub connections: AtomicI64,
    errors: [AtomicU64; KINDS.len()],
}

impl Counters {
    /// Counts an error answer of `kind`.
    pub fn error(&self, kind: ErrorKind) {
        if let Some(i) = KINDS.iter().position(|k| *k == kind) {
            self.errors[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Entries appended since the server started.
    pub fn appends_total(&self) -> u64 {
        self.appended_entries.load(Ordering::Relaxed)
    }

    /// The Prometheus text of every counter; `leader` is the role gauge.
    pub fn render(&self, leader: bool, tip: Option<u64>) -> String {
        let mut out = String::new();
        let mut counter = |name: &str, help: &str, kind: &str, value: String| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        };
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed).to_string();
        let gauge = |a: &AtomicI64| a.load(Ordering::Relaxed).to_string();
        counter(
            "weft_server_requests_total",
            "Requests answered.",
            "counter",
            get(&self.requests),
        );
        counter(
            "weft_server_appended_entries_total",
            "Entries appended through this server.",
            "counter",
            get(&self.appended_entries),
        );
        counter(
            "weft_server_append_requests_total",
            "Append requests (HTTP and session messages).",
            "counter",
            get(&self.append_requests),
        );
        counter(
            "weft_server_shed_total",
            "Requests refused by a limit (503 with a retry hint).",
            "counter",
            get(&self.shed),
        );
        counter(
            "weft_server_delivered_entries_total",
            "Entries sent to subscribers.",
            "counter",
            get(&self.delivered),
        );
        counter(
            "weft_server_subscribers",
            "Open subscriptions.",
            "gauge",
            gauge(&self.subscribers),
        );
        counter(
            "weft_server_sessions",
            "Open append sessions.",
            "gauge",
            gauge(&self.sessions),
        );
        counter(
            "weft_server_connections",
            "Open connections.",
            "gauge",
            gauge(&self.connections),
        );
        counter(
            "weft_server_leader",
            "1 when this server takes appends, 0 for a follower.",
            "gauge",
            u8::from(leader).to_string(),
        );
        if let Some(tip) = tip {
            counter(
                "weft_server_log_tip",
                "The log's next seqnum.",
                "gauge",
                tip.to_string(),
            );
        }
        let _ = writeln!(
            out,
            "# HELP weft_server_errors_total Error answers, by kind.\n# TYPE weft_server_errors_total counter"
        );
        for (kind, n) in KINDS.iter().zip(&self.errors) {
            let _ = writeln!(
                out,
                "weft_server_errors_total{{kind=\"{}\"}} {}",
                kind.as_str(),
                n.load(Ordering::Relaxed)
            );
        }
        out
    }
}
