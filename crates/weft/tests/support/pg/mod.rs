//! The PostgreSQL test server: where it is, and fresh logs on it.
//!
//! `scripts/postgres.sh start` writes `WEFT_TEST_PG_URL` into its env file
//! (`scripts/test.sh` sources it). These tests need the server: without
//! the variable they fail, naming the script, rather than skip.

#![allow(dead_code, unreachable_pub, clippy::disallowed_methods)]

use std::sync::atomic::{AtomicU64, Ordering};

use weft::storage::postgres::{PgLocation, PgOptions, PgStorage};

/// The server's URL.
pub fn server_url() -> String {
    std::env::var("WEFT_TEST_PG_URL").unwrap_or_else(|_| {
        panic!(
            "WEFT_TEST_PG_URL is not set: start the test server with scripts/postgres.sh start \
             and source its env file (scripts/test.sh does both)"
        )
    })
}

/// A log name no other test (or earlier run) uses.
pub fn fresh_name(prefix: &str) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!(
        "{prefix}_{}_{}_{n}",
        std::process::id(),
        rand::random::<u32>()
    )
}

/// The location of a fresh (empty) log.
pub fn fresh_location(prefix: &str) -> PgLocation {
    let url = server_url();
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}log={}", fresh_name(prefix))
        .parse()
        .expect("the test server's URL parses")
}

/// Options for tests: short deadlines, quick polling.
pub fn test_options() -> PgOptions {
    PgOptions::default()
        .with_pool_size(4)
        .with_op_timeout_ms(20_000)
        .with_statement_timeout_ms(15_000)
        .with_poll_interval_ms(200)
}

/// Opens `location` with the test options.
pub async fn open(location: &PgLocation) -> PgStorage {
    PgStorage::open_with(location.clone(), test_options())
        .await
        .expect("open the PostgreSQL log")
}

pub mod proxy;

/// The test server's address, for a proxy in front of it.
pub fn server_addr() -> std::net::SocketAddr {
    let loc: PgLocation = server_url().parse().expect("server URL");
    let port = loc.config().get_ports().first().copied().unwrap_or(5432);
    format!("127.0.0.1:{port}").parse().expect("address")
}

/// `location` reached through `addr` instead (a proxy), with extra
/// connection parameters.
pub fn via(location: &PgLocation, addr: std::net::SocketAddr, params: &str) -> PgLocation {
    let sep = if params.is_empty() { "" } else { "&" };
    format!(
        "postgres://weft@{addr}/weft?log={}{sep}{params}",
        location.log()
    )
    .parse()
    .expect("proxied location")
}

/// A plain client of the test server, for setting up faults.
pub async fn raw_client() -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&server_url(), tokio_postgres::NoTls)
        .await
        .expect("connect to the test server");
    tokio::spawn(connection);
    client
}

/// The rows of the log's work table `table` (`staged`, `outcomes`, ...).
pub async fn count_rows(location: &PgLocation, table: &str) -> i64 {
    raw_client()
        .await
        .query_one(
            &format!("SELECT count(*) FROM \"{}\".{table}", location.log()),
            &[],
        )
        .await
        .expect("count rows")
        .get(0)
}

/// How many functions named `name` the log's schema holds (0 or 1: the
/// log's functions are not overloaded).
pub async fn function_count(location: &PgLocation, name: &str) -> i64 {
    raw_client()
        .await
        .query_one(
            "SELECT count(*) FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n \
             ON n.oid = p.pronamespace WHERE n.nspname = $1 AND p.proname = $2",
            &[&location.log(), &name],
        )
        .await
        .expect("count functions")
        .get(0)
}

/// The log's numbering lock, as `docs/FORMATS.md` describes its key.
pub fn numbering_lock_key(location: &PgLocation) -> String {
    format!(
        r#"(2003134068::bigint << 32) | ('"{}".head'::regclass::oid::bigint)"#,
        location.log()
    )
}

/// Waits (bounded) until the log's `staged` holds `n` groups.
pub async fn until_staged(location: &PgLocation, n: i64) {
    for _ in 0..400 {
        if count_rows(location, "staged").await == n {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("{n} groups never got staged");
}

/// Another session holding the log's numbering lock (a round that takes
/// long): every append group meanwhile is staged, and no round runs.
pub struct HeldLock {
    client: tokio_postgres::Client,
    key: String,
}

impl HeldLock {
    /// Takes the lock of `location`'s log.
    pub async fn take(location: &PgLocation) -> HeldLock {
        let client = raw_client().await;
        let key = numbering_lock_key(location);
        client
            .execute(&format!("SELECT pg_advisory_lock({key})"), &[])
            .await
            .expect("take the numbering lock");
        HeldLock { client, key }
    }

    /// Lets go of it.
    pub async fn release(self) {
        self.client
            .execute(&format!("SELECT pg_advisory_unlock({})", self.key), &[])
            .await
            .expect("release the numbering lock");
    }
}
