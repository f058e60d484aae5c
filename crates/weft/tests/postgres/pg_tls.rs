//! Connecting as users do, on the real server (`scripts/postgres.sh`
//! offers TLS with a certificate its own throwaway root signed, for the
//! address 127.0.0.1 only): every `sslmode` against that server, trusted
//! and untrusted roots, a host name the certificate does not carry; and
//! what a mistaken location or schema gets: `InvalidInput`, before
//! anything is written.

// Tests read real time and randomness (fresh log names).
#![allow(clippy::disallowed_methods)]

use crate::support::pg as pg_support;

use weft::storage::postgres::{PgLocation, PgSslMode, PgStorage};
use weft::{AppendRequest, ErrorKind, Log, Storage};

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: start the test server with scripts/postgres.sh start (TLS on)")
    })
}

/// A fresh log on the server through `host`, with extra parameters.
fn location(host: &str, params: &str) -> PgLocation {
    let port = pg_support::server_addr().port();
    let name = pg_support::fresh_name("tls");
    format!("postgres://weft@{host}:{port}/weft?log={name}&application_name={name}&{params}")
        .parse()
        .expect("location")
}

/// Whether every connection the server has from `location`'s handle
/// speaks TLS (and that there is one).
async fn all_tls(location: &PgLocation) -> bool {
    let row = pg_support::raw_client()
        .await
        .query_one(
            "SELECT count(*), coalesce(bool_and(s.ssl), false) FROM pg_stat_activity a \
             JOIN pg_stat_ssl s ON s.pid = a.pid WHERE a.application_name = $1",
            &[&location.log()],
        )
        .await
        .unwrap();
    assert!(row.get::<_, i64>(0) > 0, "the handle has connections");
    row.get(1)
}

/// Opens, appends and reads back; answers whether it went over TLS.
async fn round_trip(location: &PgLocation) -> bool {
    let storage = PgStorage::open_with(location.clone(), pg_support::test_options())
        .await
        .unwrap_or_else(|e| panic!("open {location}: {e}"));
    let log = Log::new(storage);
    let tag: weft::LogTag = "t".parse().unwrap();
    let r = log
        .append(AppendRequest::new(tag.clone(), "x"))
        .await
        .unwrap();
    assert_eq!(r.seqnum, 0);
    assert_eq!(log.read_all(&tag).await.unwrap().len(), 1);
    let tls = all_tls(location).await;
    log.close().await.unwrap();
    tls
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sslmode_against_a_server_with_tls() {
    let ca = env("WEFT_TEST_PG_CA");
    let cases: Vec<(String, bool)> = vec![
        ("sslmode=disable".into(), false),
        (String::new(), true),
        ("sslmode=prefer".into(), true),
        ("sslmode=require".into(), true),
        (format!("sslmode=require&sslrootcert={ca}"), true),
        (format!("sslmode=verify-ca&sslrootcert={ca}"), true),
        (format!("sslmode=verify-full&sslrootcert={ca}"), true),
    ];
    for (params, tls) in cases {
        let loc = location("127.0.0.1", &params);
        assert_eq!(round_trip(&loc).await, tls, "{params}");
    }
    // `localhost` is not a name the certificate carries: verify-ca does
    // not ask, verify-full refuses.
    let loc = location("localhost", &format!("sslmode=verify-ca&sslrootcert={ca}"));
    assert_eq!(loc.ssl_mode(), PgSslMode::VerifyCa);
    assert!(round_trip(&loc).await);
    let loc = location(
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    );
    let err = PgStorage::open_with(loc, pg_support::test_options())
        .await
        .expect_err("a certificate without the host's name");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configuration_errors_are_invalid_input() {
    let other = env("WEFT_TEST_PG_OTHER_CA");
    // Refused when the server's certificate is checked: a root that did
    // not sign it, in every mode that checks.
    for params in [
        format!("sslmode=require&sslrootcert={other}"),
        format!("sslmode=verify-ca&sslrootcert={other}"),
        format!("sslmode=verify-full&sslrootcert={other}"),
    ] {
        let err = PgStorage::open_with(location("127.0.0.1", &params), pg_support::test_options())
            .await
            .expect_err("an untrusted certificate");
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{params}: {err}");
    }
    // Refused before connecting: a root file that is missing or no PEM.
    let not_pem = std::env::current_exe().unwrap();
    for params in [
        "sslmode=verify-full&sslrootcert=no-such-root.pem".to_owned(),
        format!("sslmode=verify-ca&sslrootcert={}", not_pem.display()),
    ] {
        let err = PgStorage::open_with(location("127.0.0.1", &params), pg_support::test_options())
            .await
            .expect_err("no usable root");
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{params}: {err}");
    }
    // Refused when parsed.
    let port = pg_support::server_addr().port();
    for url in [
        format!("postgres://weft@127.0.0.1:{port}/weft?sslmode=verify"),
        format!("postgres://weft@127.0.0.1:{port}/weft?sslmode=require&sslmode=disable"),
        format!("postgres://weft@127.0.0.1:{port}/weft?sslrootcert="),
        format!("postgres://weft@127.0.0.1:{port}/weft?dbname=other"),
        format!("postgres://weft@127.0.0.1:{port}/weft?log=a&dbname=postgres"),
    ] {
        let err = url.parse::<PgLocation>().expect_err(&url);
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{url}: {err}");
    }
    // A `dbname` that agrees with the path, or stands alone, is fine.
    for url in [
        format!("postgres://weft@127.0.0.1:{port}/weft?dbname=weft"),
        format!("postgres://weft@127.0.0.1:{port}?dbname=weft"),
    ] {
        let loc: PgLocation = url.parse().expect(&url);
        assert_eq!(loc.config().get_dbname(), Some("weft"), "{url}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_holding_other_tables_is_refused_and_left_alone() {
    let loc = location("127.0.0.1", "sslmode=disable");
    let s = loc.log().to_owned();
    let raw = pg_support::raw_client().await;
    raw.batch_execute(&format!(
        r#"CREATE SCHEMA "{s}"; CREATE TABLE "{s}".head (id int PRIMARY KEY, note text);
           INSERT INTO "{s}".head VALUES (1, 'theirs');"#
    ))
    .await
    .unwrap();
    let err = PgStorage::open_with(loc.clone(), pg_support::test_options())
        .await
        .expect_err("somebody else's schema");
    assert_eq!(err.kind(), ErrorKind::InvalidInput, "{err}");
    // Nothing of weft's was created in it; their row is as it was.
    let row = raw
        .query_one(
            "SELECT (SELECT count(*) FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n \
               ON n.oid = c.relnamespace WHERE n.nspname = $1 AND c.relkind = 'r'), \
                    (SELECT count(*) FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n \
               ON n.oid = p.pronamespace WHERE n.nspname = $1)",
            &[&s],
        )
        .await
        .unwrap();
    assert_eq!((row.get::<_, i64>(0), row.get::<_, i64>(1)), (1, 0));
    let note: String = raw
        .query_one(&format!(r#"SELECT note FROM "{s}".head"#), &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(note, "theirs");
    // A fresh schema of the same server opens (the refusal was the
    // schema's, not the server's).
    let ok = PgStorage::open_with(
        location("127.0.0.1", "sslmode=disable"),
        pg_support::test_options(),
    )
    .await
    .unwrap();
    ok.close().await.unwrap();
}
