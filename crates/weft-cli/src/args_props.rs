//! No argument vector and no environment makes the command panic while it
//! reads them: a property test feeds arbitrary arguments (known flags,
//! numbers of every size, locations, arbitrary text) to the parser, and
//! for each accepted command line builds the store its location names from
//! the flags and an arbitrary environment, then sends one request on an
//! HTTP client that sends nothing, so object_store signs it.

use std::sync::OnceLock;

use clap::{CommandFactory, Parser};
use object_store::ClientOptions;
use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpErrorKind, HttpRequest, HttpResponse, HttpService,
};
use proptest::prelude::*;
use weft::ErrorKind;
use weft::connect::Location;

use crate::Cli;

/// Every request fails as a refused connection, after signing.
#[derive(Debug)]
struct Offline;

impl HttpConnector for Offline {
    fn connect(&self, _: &ClientOptions) -> object_store::Result<HttpClient> {
        Ok(HttpClient::new(Refuse))
    }
}

#[derive(Debug)]
struct Refuse;

#[async_trait::async_trait]
impl HttpService for Refuse {
    async fn call(&self, _: HttpRequest) -> Result<HttpResponse, HttpError> {
        Err(HttpError::new(
            HttpErrorKind::Connect,
            std::io::Error::from(std::io::ErrorKind::ConnectionRefused),
        ))
    }
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime")
    })
}

const ENV_KEYS: &[&str] = &[
    "AWS_ENDPOINT_URL",
    "AWS_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_ALLOW_HTTP",
    "AZURE_STORAGE_ACCOUNT_NAME",
    "AZURE_STORAGE_ACCOUNT_KEY",
    "AZURE_STORAGE_ENDPOINT",
    "AZURE_STORAGE_TOKEN",
    "AZURE_STORAGE_USE_EMULATOR",
    "AZURE_ALLOW_HTTP",
    "AZURE_MSI_ENDPOINT",
];

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("true".to_string()),
        "(http|https)://[a-z0-9.\\[\\]:]{0,20}",
        "[a-zA-Z0-9:/._ -]{0,12}",
        "[\\x00-\\x7f]{0,12}",
        any::<String>(),
    ]
}

fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("1e30".to_string()),
        Just("-1".to_string()),
        Just("NaN".to_string()),
        Just("inf".to_string()),
        Just("18446744073709551616".to_string()),
        Just("0".to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        any::<f64>().prop_map(|n| n.to_string()),
    ]
}

fn location() -> impl Strategy<Value = String> {
    prop_oneof![
        "(s3|az)://[a-z0-9-]{3,8}(/[a-z0-9.]{0,4}){0,3}",
        Just("s3://bucket/../x".to_string()),
        Just("az://logs/./x".to_string()),
        "[a-z]{1,6}",
        text(),
    ]
}

fn token() -> impl Strategy<Value = String> {
    let flags = [
        "--endpoint",
        "--region",
        "--allow-http",
        "--timeout",
        "--poll-ms",
        "--tag",
        "-t",
        "--from",
        "--limit",
        "--max",
        "--json",
        "--create",
        "--if-version",
        "--manifest",
        "--grace-secs",
        "--through",
        "--dry-run",
        "--metrics-addr",
        "-v",
        "--",
        "-",
    ];
    prop_oneof![
        3 => proptest::sample::select(flags.to_vec()).prop_map(str::to_string),
        2 => number(),
        1 => location(),
        1 => text(),
    ]
}

fn argv() -> impl Strategy<Value = (String, Vec<String>)> {
    let commands = [
        "demo", "append", "read", "tail", "inspect", "wal", "verify", "gc", "snapshot", "help",
    ];
    (
        proptest::sample::select(commands.to_vec()),
        location(),
        prop::collection::vec(token(), 0..8),
    )
        .prop_map(|(command, log, rest)| {
            let mut args = vec!["weft".to_string(), command.to_string()];
            if command == "wal" {
                args.push("dump".to_string());
            }
            args.push(log.clone());
            args.extend(rest);
            (log, args)
        })
}

/// Builds the store `log` names from the parsed flags and `env`, and sends
/// one request through [`Offline`]; a refusal must be a typed error.
fn build_and_sign(cli: &Cli, log: &str, env: &[(&str, String)]) {
    let lookup = |key: &str| env.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone());
    let builder = match Location::parse(log) {
        Ok(Location::S3 { bucket, prefix }) => cli
            .store
            .s3_settings(&bucket, &prefix, lookup)
            .and_then(|s| s.to_builder())
            .map(|b| b.with_http_connector(Offline).build().map(store)),
        Ok(Location::Azure { container, prefix }) => cli
            .store
            .azure_settings(&container, &prefix, lookup)
            .and_then(|s| s.to_builder())
            .map(|b| b.with_http_connector(Offline).build().map(store)),
        Ok(_) => return,
        Err(e) => Err(e),
    };
    match builder {
        Ok(Ok(store)) => {
            let head = runtime().block_on(store.head(&object_store::path::Path::from("manifest")));
            assert!(head.is_err(), "the offline client answered");
        }
        // object_store's own checks (a key that is not base64).
        Ok(Err(_)) => {}
        Err(e) => assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}"),
    }
}

fn store(s: impl object_store::ObjectStore) -> std::sync::Arc<dyn object_store::ObjectStore> {
    std::sync::Arc::new(s)
}

#[test]
fn the_command_definition_is_consistent() {
    Cli::command().debug_assert();
}

#[test]
fn the_values_that_panicked_are_usage_or_input_errors() {
    // Rejected by the parser (usage error, exit 2).
    for bad in [
        &["weft", "tail", "log", "--timeout", "1e30"][..],
        &["weft", "tail", "log", "--timeout", "-1"],
        &["weft", "tail", "log", "--timeout", "NaN"],
        &["weft", "tail", "log", "--poll-ms", "0"],
        &["weft", "tail", "log", "--poll-ms", "18446744073709551615"],
    ] {
        assert!(Cli::try_parse_from(bad).is_err(), "{bad:?}");
    }
    // Accepted by the parser, refused as InvalidInput by the settings.
    let env = [
        ("AWS_ACCESS_KEY_ID", "k".to_string()),
        ("AWS_SECRET_ACCESS_KEY", "s".to_string()),
    ];
    for (flags, extra_env) in [
        (vec!["--endpoint", "garbage"], None),
        (vec!["--endpoint", ""], None),
        (vec!["--endpoint", "http://", "--allow-http"], None),
        (
            vec!["--endpoint", "http://127.0.0.1:99999", "--allow-http"],
            None,
        ),
        (vec!["--endpoint", "http://[::1", "--allow-http"], None),
        (vec!["--endpoint", "localhost:9000"], None),
        (vec!["--endpoint", "http://127.0.0.1:8333"], None),
        (vec!["--region", "us-east-1\nx"], None),
        (vec![], Some(("AWS_ENDPOINT_URL", "garbage"))),
        (vec![], Some(("AWS_SESSION_TOKEN", "a\nb"))),
    ] {
        let mut argv = vec!["weft", "read", "s3://logs/p"];
        argv.extend(&flags);
        let cli = Cli::try_parse_from(&argv).expect("the parser accepts it");
        let mut env = env.to_vec();
        env.extend(extra_env.map(|(k, v)| (k, v.to_string())));
        let lookup = |key: &str| env.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone());
        let err = cli
            .store
            .s3_settings("logs", "p", lookup)
            .and_then(|s| s.build())
            .expect_err(&format!("{flags:?} {extra_env:?}"));
        assert_eq!(err.kind(), ErrorKind::InvalidInput, "{flags:?}: {err}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn no_argument_vector_or_environment_panics(
        (log, argv) in argv(),
        values in prop::collection::vec(prop::option::of(text()), ENV_KEYS.len()),
    ) {
        let env: Vec<(&str, String)> = ENV_KEYS
            .iter()
            .copied()
            .zip(values)
            .filter_map(|(k, v)| v.map(|v| (k, v)))
            .collect();
        if let Ok(cli) = Cli::try_parse_from(&argv) {
            build_and_sign(&cli, &log, &env);
        }
    }
}
