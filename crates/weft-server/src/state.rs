//! What every handler shares: the log being served (replaced when a
//! standby takes over), its role, the limits' semaphores and the counters.

use std::sync::{Arc, RwLock};

use tokio::sync::{Semaphore, watch};
use weft::Log;

use crate::metrics::Counters;
use crate::options::ServerOptions;

/// Whether this server takes appends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// It holds the log's writer: appends are served here.
    Leader,
    /// It serves reads; appends are answered `read_only` with the leader's
    /// address when it is known.
    Follower,
}

impl Role {
    /// `leader` or `follower`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Leader => "leader",
            Role::Follower => "follower",
        }
    }
}

/// The log a server serves right now.
#[derive(Clone)]
pub struct Current {
    /// The log.
    pub log: Log,
    /// Its role.
    pub role: Role,
    /// Where the leader is, for a follower that knows.
    pub leader: Option<String>,
    /// Who holds the writer lease, when the backend has one.
    pub lease_holder: Option<String>,
}

/// The state handlers share.
pub struct Shared {
    current: RwLock<Current>,
    role_tx: watch::Sender<Role>,
    /// `dir`, `memory`, `s3`, `az` or `postgres`.
    pub backend: String,
    /// The options the server runs with.
    pub options: ServerOptions,
    /// The counters `/metrics` shows.
    pub counters: Counters,
    /// Encoded subscription events of recent entries.
    pub events: crate::events::EventCache,
    /// Requests in flight.
    pub requests: Arc<Semaphore>,
    /// Request body bytes in flight.
    pub body_bytes: Arc<Semaphore>,
    shutdown: watch::Sender<bool>,
    /// Prometheus text of the process's global recorder, appended to
    /// `/metrics` when set (the command installs one).
    extra_metrics: std::sync::OnceLock<Box<dyn Fn() -> String + Send + Sync>>,
}

impl Shared {
    /// State for serving `log` in `role`.
    pub fn new(
        log: Log,
        role: Role,
        backend: impl Into<String>,
        options: ServerOptions,
    ) -> Arc<Self> {
        let limits = &options.limits;
        let requests = Arc::new(Semaphore::new(limits.max_requests.max(1)));
        let body_bytes = Arc::new(Semaphore::new(
            limits.max_in_flight_bytes.clamp(1, Semaphore::MAX_PERMITS),
        ));
        Arc::new(Shared {
            current: RwLock::new(Current {
                log,
                role,
                leader: None,
                lease_holder: None,
            }),
            role_tx: watch::Sender::new(role),
            backend: backend.into(),
            options,
            counters: Counters::default(),
            events: Default::default(),
            requests,
            body_bytes,
            shutdown: watch::Sender::new(false),
            extra_metrics: std::sync::OnceLock::new(),
        })
    }

    /// Sets the hook that renders the process's global metrics recorder
    /// (weft's own counters) after the server's; only the first call counts.
    pub fn set_extra_metrics(&self, render: impl Fn() -> String + Send + Sync + 'static) {
        let _ = self.extra_metrics.set(Box::new(render));
    }

    /// The global recorder's text, when a hook is set.
    pub fn extra_metrics(&self) -> Option<String> {
        self.extra_metrics.get().map(|render| render())
    }

    /// The log served now, and its role.
    pub fn current(&self) -> Current {
        self.current.read().expect("current lock").clone()
    }

    /// The log served now.
    pub fn log(&self) -> Log {
        self.current.read().expect("current lock").log.clone()
    }

    /// Serves `current` from now on (a standby that took the log over, a
    /// leader that stepped down).
    pub fn replace(&self, current: Current) {
        let role = current.role;
        *self.current.write().expect("current lock") = current;
        self.role_tx.send_replace(role);
    }

    /// Updates what a follower knows about its leader.
    pub fn set_leader(&self, leader: Option<String>, lease_holder: Option<String>) {
        let mut current = self.current.write().expect("current lock");
        current.leader = leader;
        current.lease_holder = lease_holder;
    }

    /// Watches the role.
    pub fn role(&self) -> watch::Receiver<Role> {
        self.role_tx.subscribe()
    }

    /// Starts draining: subscriptions and sessions end, new requests are
    /// refused by the listener.
    pub fn begin_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// Resolves once draining began.
    pub fn shutting_down(&self) -> impl std::future::Future<Output = ()> + Send + use<> {
        let mut rx = self.shutdown.subscribe();
        async move {
            // An error means the sender is gone: the server is gone too.
            let _ = rx.wait_for(|down| *down).await;
        }
    }

    /// True once draining began.
    pub fn is_shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }
}
