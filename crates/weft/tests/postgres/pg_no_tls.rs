//! A location that demands TLS against a server that offers none: a
//! configuration error (`InvalidInput`: change the location or the
//! server), not `Unavailable` (retry later). The test server is switched
//! to `ssl = off` for this binary's one test and back afterwards, so it
//! lives alone here, apart from `pg_tls.rs`, whose tests need TLS on.

// Tests read real time and randomness (fresh log names).
#![allow(clippy::disallowed_methods)]

use crate::support::pg as pg_support;

use std::time::Duration;

use weft::ErrorKind;
use weft::storage::postgres::{PgLocation, PgStorage};

/// Sets `ssl` on the test server and waits (a bounded number of times)
/// until a new connection sees it.
async fn set_ssl(on: bool) {
    let client = pg_support::raw_client().await;
    let statement = if on {
        "ALTER SYSTEM RESET ssl"
    } else {
        "ALTER SYSTEM SET ssl = off"
    };
    client.batch_execute(statement).await.unwrap();
    client
        .batch_execute("SELECT pg_reload_conf()")
        .await
        .unwrap();
    let want = if on { "on" } else { "off" };
    for _ in 0..100 {
        let now: String = pg_support::raw_client()
            .await
            .query_one("SHOW ssl", &[])
            .await
            .unwrap()
            .get(0);
        if now == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the server did not take ssl = {want}");
}

fn location(port: u16, params: &str) -> PgLocation {
    let name = pg_support::fresh_name("notls");
    format!("postgres://weft@127.0.0.1:{port}/weft?log={name}&{params}")
        .parse()
        .expect("location")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demanding_tls_from_a_server_without_it_is_a_configuration_error() {
    let ca = std::env::var("WEFT_TEST_PG_CA").unwrap_or_else(|_| {
        panic!("WEFT_TEST_PG_CA is not set: start the test server with scripts/postgres.sh start")
    });
    set_ssl(false).await;
    // The body in its own task, so that the server gets TLS back whatever
    // it does.
    let body = tokio::spawn(async move {
        let port = pg_support::server_addr().port();
        for params in [
            "sslmode=require".to_owned(),
            format!("sslmode=require&sslrootcert={ca}"),
            format!("sslmode=verify-ca&sslrootcert={ca}"),
            format!("sslmode=verify-full&sslrootcert={ca}"),
        ] {
            let err = PgStorage::open_with(location(port, &params), pg_support::test_options())
                .await
                .expect_err("TLS demanded, none offered");
            assert_eq!(err.kind(), ErrorKind::InvalidInput, "{params}: {err}");
        }
        // Modes that do without TLS still connect.
        for params in ["sslmode=prefer", "sslmode=disable", ""] {
            let storage = PgStorage::open_with(location(port, params), pg_support::test_options())
                .await
                .unwrap_or_else(|e| panic!("{params}: {e}"));
            weft::Storage::close(&storage).await.unwrap();
        }
        // Nothing listening is still `Unavailable` with TLS demanded: the
        // question is put to a server only when one answers.
        let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let nobody = free.local_addr().unwrap().port();
        drop(free);
        let err = PgStorage::open_with(
            location(nobody, "sslmode=require"),
            pg_support::test_options(),
        )
        .await
        .expect_err("nothing listens there");
        assert_eq!(err.kind(), ErrorKind::Unavailable, "{err}");
    })
    .await;
    set_ssl(true).await;
    if let Err(e) = body {
        std::panic::resume_unwind(e.into_panic());
    }
}
