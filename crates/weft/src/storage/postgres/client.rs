//! The connection pool and the one way every statement runs: bounded by a
//! deadline, classified on failure.

use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod, Runtime};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::errors::{self, Op};
use super::options::PgOptions;
use crate::connect::PgLocation;
use crate::error::{Error, Result};

/// The connection settings every connection of a handle uses: the
/// location's, plus a server-side statement timeout and TCP keepalives,
/// so a statement the server cannot finish fails there first.
pub(super) fn connection_config(
    location: &PgLocation,
    options: &PgOptions,
) -> tokio_postgres::Config {
    let mut config = location.config().clone();
    if options.statement_timeout_ms > 0 {
        let mut opts = config.get_options().unwrap_or_default().to_owned();
        if !opts.is_empty() {
            opts.push(' ');
        }
        opts.push_str(&format!(
            "-c statement_timeout={}",
            options.statement_timeout_ms
        ));
        config.options(&opts);
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(options.op_timeout());
    }
    if config.get_application_name().is_none() {
        config.application_name("weft");
    }
    config.keepalives(true);
    config.keepalives_idle(Duration::from_secs(10));
    config
}

/// A pool of connections to one server.
pub(super) struct Connections {
    pool: Pool,
    timeout: Duration,
    /// The settings, when they demand TLS: a connect failure is then
    /// looked into (does the server offer TLS at all?).
    tls_required: Option<tokio_postgres::Config>,
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connections")
            .field("status", &self.pool.status())
            .finish()
    }
}

impl Connections {
    /// A pool for `config`; connects lazily.
    ///
    /// Errors: `Internal` when the pool cannot be built.
    pub(super) fn new(
        config: tokio_postgres::Config,
        tls: MakeRustlsConnect,
        options: &PgOptions,
    ) -> Result<Self> {
        let tls_required = (config.get_ssl_mode() == tokio_postgres::config::SslMode::Require)
            .then(|| config.clone());
        let manager = Manager::from_config(
            config,
            tls,
            ManagerConfig {
                // A broken connection is noticed (and replaced) when it is
                // handed out again; a live one costs no round trip.
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let timeout = options.op_timeout();
        let pool = Pool::builder(manager)
            .max_size(options.pool_size)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(timeout))
            .create_timeout(Some(timeout))
            .recycle_timeout(Some(timeout))
            .build()
            .map_err(|e| Error::internal(format!("build the PostgreSQL pool: {e}")))?;
        Ok(Connections {
            pool,
            timeout,
            tls_required,
        })
    }

    /// A connection; nothing is sent yet, so failures are never
    /// `Indeterminate`.
    pub(super) async fn get(&self, what: &str) -> Result<Object> {
        match tokio::time::timeout(self.timeout, self.pool.get()).await {
            Ok(Ok(client)) => Ok(client),
            Ok(Err(e)) => {
                let err = errors::classify_pool(e, format!("{what}: connect"));
                // A server that answers the TLS request with "no" fails the
                // connect like an unreachable one would (tokio-postgres
                // gives no kind to tell them apart): ask it directly. That
                // is a configuration error, which retrying never mends.
                if err.kind() == crate::ErrorKind::Unavailable
                    && let Some(config) = &self.tls_required
                    && let Some(at) = super::tls::refuses_tls(config, self.timeout).await
                {
                    return Err(Error::invalid_input(format!(
                        "{what}: connect: the server at {at} does not offer TLS, and the \
                         location's sslmode demands it (use sslmode=prefer or disable, or turn \
                         TLS on at the server)"
                    ))
                    .with_source(err));
                }
                Err(err)
            }
            Err(_) => Err(errors::timed_out(
                Op::Read,
                format!("{what}: connect"),
                self.timeout,
            )),
        }
    }

    /// Runs one statement and returns its rows.
    ///
    /// A statement that gets no answer within the deadline leaves its
    /// connection out of the pool (dropping it closes the socket).
    ///
    /// Errors: see [`errors::classify`]; a timed-out write is
    /// `Indeterminate`, a timed-out read `Unavailable`.
    pub(super) async fn query(
        &self,
        op: Op,
        what: &str,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>> {
        let client = self.get(what).await?;
        let run = async {
            // Preparing sends nothing that writes: a failure here is a
            // read failure whatever the statement.
            let statement = client
                .prepare_cached(sql)
                .await
                .map_err(|e| errors::classify(e, Op::Read, what))?;
            client
                .query(&statement, params)
                .await
                .map_err(|e| errors::classify(e, op, what))
        };
        match tokio::time::timeout(self.timeout, run).await {
            Ok(result) => result,
            Err(_) => {
                drop(Object::take(client));
                Err(errors::timed_out(op, what, self.timeout))
            }
        }
    }

    /// Closes every connection; later `get`s fail with `Closed`.
    pub(super) fn close(&self) {
        self.pool.close();
    }
}
