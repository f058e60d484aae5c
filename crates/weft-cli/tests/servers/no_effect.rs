//! What a refused or losing `weft append` leaves behind: nothing.
//!
//! * Every invalid append argument, against every backend (a directory,
//!   S3 on SeaweedFS, Azure on Azurite, PostgreSQL), plain, with
//!   `--take-over` and with `--create` on a missing log, exits
//!   `invalid_input` and leaves every stored byte as it was: no claim, no
//!   lease, no created log.
//! * Plain appends racing for one bucket log, as separate processes, never
//!   fence one another: each one appends or is refused `locked`.
//!
//! Runs against the servers `scripts/test.sh` starts and FAILS (never
//! skips) when their env is missing.

// Tests read real time (fresh names) and run real processes: the
// determinism rules of clippy.toml are for library code.
#![allow(clippy::disallowed_methods)]

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use object_store::ObjectStore;
use weft::connect::{AzureSettings, S3Settings};
use weft::model::{MAX_APPEND_ID_BYTES, MAX_ENTRY_BYTES, MAX_TAGS_PER_ENTRY};

const BIN: &str = env!("CARGO_BIN_EXE_weft");

fn required(key: &str) -> String {
    match std::env::var(key) {
        Ok(v) if !v.is_empty() => v,
        _ => panic!("{key} is not set: run scripts/test.sh (it starts the test servers)"),
    }
}

fn nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    Dir,
    S3,
    Azure,
    Postgres,
}

/// One log location of a backend, and how to look at everything stored
/// there.
struct Target {
    backend: Backend,
    url: String,
    /// The directory of a `dir` log.
    path: Option<PathBuf>,
    /// The store of a bucket log (listing under its prefix).
    store: Option<Arc<dyn ObjectStore>>,
}

fn target(backend: Backend, root: &Path, name: &str) -> Target {
    let prefix = format!(
        "weft-cli-tests/no-effect/{name}-{}-{}",
        std::process::id(),
        nanos()
    );
    match backend {
        Backend::Dir => {
            let path = root.join(name);
            Target {
                backend,
                url: path.to_str().unwrap().to_owned(),
                path: Some(path),
                store: None,
            }
        }
        Backend::S3 => {
            let bucket = required("WEFT_TEST_S3_BUCKET");
            let mut s = S3Settings::from_env(&bucket, &prefix).expect("S3 env");
            s.endpoint = Some(required("WEFT_TEST_S3_ENDPOINT"));
            s.allow_http = true;
            s.region.get_or_insert_with(|| "us-east-1".to_owned());
            Target {
                backend,
                url: format!("s3://{bucket}/{prefix}"),
                path: None,
                store: Some(s.build().unwrap()),
            }
        }
        Backend::Azure => {
            let container = required("WEFT_TEST_AZURE_CONTAINER");
            let mut s = AzureSettings::from_env(&container, &prefix).expect("Azure env");
            s.endpoint = Some(required("WEFT_TEST_AZURE_ENDPOINT"));
            s.allow_http = true;
            Target {
                backend,
                url: format!("az://{container}/{prefix}"),
                path: None,
                store: Some(s.build().unwrap()),
            }
        }
        Backend::Postgres => {
            let url = required("WEFT_TEST_PG_URL");
            let sep = if url.contains('?') { '&' } else { '?' };
            let log = format!(
                "noeff_{name}_{}_{}",
                std::process::id(),
                nanos() % 1_000_000_000
            );
            Target {
                backend,
                url: format!("{url}{sep}log={}", log.replace('-', "_")),
                path: None,
                store: None,
            }
        }
    }
}

fn command(backend: Backend, args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args).env_remove("RUST_LOG").env(
        "WEFT_CACHE_DIR",
        Path::new(env!("CARGO_TARGET_TMPDIR")).join("weft-cli-cache"),
    );
    match backend {
        Backend::S3 => {
            cmd.args([
                "--endpoint",
                &required("WEFT_TEST_S3_ENDPOINT"),
                "--allow-http",
            ]);
        }
        Backend::Azure => {
            cmd.args([
                "--endpoint",
                &required("WEFT_TEST_AZURE_ENDPOINT"),
                "--allow-http",
            ]);
        }
        Backend::Dir | Backend::Postgres => {}
    }
    cmd
}

fn run(backend: Backend, args: &[&str], stdin: Option<&[u8]>) -> Output {
    let mut child = command(backend, args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run weft");
    if let Some(bytes) = stdin {
        // A command that refuses early may close stdin before reading it all.
        let _ = child.stdin.take().unwrap().write_all(bytes);
    }
    child.wait_with_output().unwrap()
}

/// Everything stored at the target, byte for byte (PostgreSQL: the log's
/// summary, which counts every row, or "absent").
fn state(t: &Target, rt: &tokio::runtime::Runtime) -> BTreeMap<String, Vec<u8>> {
    let mut all = BTreeMap::new();
    match t.backend {
        Backend::Dir => walk(t.path.as_ref().unwrap(), t.path.as_ref().unwrap(), &mut all),
        Backend::S3 | Backend::Azure => rt.block_on(async {
            let store = t.store.as_ref().unwrap();
            let mut listing = store.list(None);
            while let Some(meta) = listing.next().await {
                let meta = meta.unwrap();
                let bytes = store
                    .get(&meta.location)
                    .await
                    .unwrap()
                    .bytes()
                    .await
                    .unwrap();
                all.insert(meta.location.to_string(), bytes.to_vec());
            }
        }),
        Backend::Postgres => {
            let out = run(t.backend, &["inspect", &t.url, "--json"], None);
            let key = match out.status.code() {
                Some(0) => "summary",
                Some(3) => "absent",
                other => panic!(
                    "inspect {}: {other:?} {}",
                    t.url,
                    String::from_utf8_lossy(&out.stderr)
                ),
            };
            all.insert(key.to_owned(), out.stdout);
        }
    }
    all
}

fn walk(root: &Path, dir: &Path, into: &mut BTreeMap<String, Vec<u8>>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        let name = path
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if path.is_dir() {
            into.insert(format!("{name}/"), Vec::new());
            walk(root, &path, into);
        } else {
            into.insert(name, std::fs::read(&path).unwrap());
        }
    }
}

/// An invalid append: its arguments after the log, and its stdin.
struct Invalid {
    what: &'static str,
    args: Vec<String>,
    stdin: Option<Vec<u8>>,
}

fn invalid_appends() -> Vec<Invalid> {
    let s = |v: &[&str]| v.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
    let mut too_many_tags = Vec::new();
    for i in 0..=MAX_TAGS_PER_ENTRY {
        too_many_tags.push("--tag".to_owned());
        too_many_tags.push(format!("t{i}"));
    }
    too_many_tags.push("x".to_owned());
    vec![
        Invalid {
            what: "a payload one byte over the entry limit",
            args: s(&["--tag", "orders", "-"]),
            stdin: Some(vec![b'p'; MAX_ENTRY_BYTES + 1]),
        },
        Invalid {
            what: "an empty --id",
            args: s(&["--tag", "orders", "--id", "", "x"]),
            stdin: None,
        },
        Invalid {
            what: "an --id with a control character",
            args: s(&["--tag", "orders", "--id", "a\u{7}b", "x"]),
            stdin: None,
        },
        Invalid {
            what: "an --id over its length limit",
            args: vec![
                "--tag".into(),
                "orders".into(),
                "--id".into(),
                "i".repeat(MAX_APPEND_ID_BYTES + 1),
                "x".into(),
            ],
            stdin: None,
        },
        Invalid {
            what: "more tags than an entry may carry",
            args: too_many_tags,
            stdin: None,
        },
        Invalid {
            what: "a tag with an empty key",
            args: s(&["--tag", "orders:", "x"]),
            stdin: None,
        },
        Invalid {
            what: "a tag with a control character",
            args: s(&["--tag", "ord\u{1}ers", "x"]),
            stdin: None,
        },
    ]
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn every_invalid_append_changes_nothing_on_every_backend() {
    let rt = runtime();
    let root = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for backend in [Backend::Dir, Backend::S3, Backend::Azure, Backend::Postgres] {
        let existing = target(
            backend,
            root.path(),
            &format!("{backend:?}-log").to_lowercase(),
        );
        let first = run(
            backend,
            &[
                "append",
                &existing.url,
                "--create",
                "--tag",
                "orders",
                "first",
            ],
            None,
        );
        assert!(first.status.success(), "{backend:?}: {first:?}");
        let missing = target(
            backend,
            root.path(),
            &format!("{backend:?}-none").to_lowercase(),
        );
        for case in invalid_appends() {
            let extra: Vec<&str> = case.args.iter().map(String::as_str).collect();
            for (t, flags) in [
                (&existing, &[][..]),
                (&existing, &["--take-over"][..]),
                (&missing, &["--create"][..]),
                (&missing, &["--create", "--take-over"][..]),
            ] {
                let before = state(t, &rt);
                let mut args = vec!["append", t.url.as_str()];
                args.extend_from_slice(flags);
                args.extend_from_slice(&extra);
                let out = run(backend, &args, case.stdin.as_deref());
                let err = String::from_utf8_lossy(&out.stderr);
                assert_eq!(
                    out.status.code(),
                    Some(4),
                    "{backend:?} {flags:?}: {}: {err}",
                    case.what
                );
                assert!(err.trim_end().ends_with("(invalid_input)"), "{err}");
                assert_eq!(
                    state(t, &rt),
                    before,
                    "{backend:?} {flags:?}: {} changed the store",
                    case.what
                );
                checked += 1;
            }
        }
        // A snapshot through a seqnum the log has not written is refused
        // before anything is stored (bucket logs only have snapshots).
        if matches!(backend, Backend::S3 | Backend::Azure) {
            let before = state(&existing, &rt);
            let out = run(
                backend,
                &["snapshot", &existing.url, "--through", "99"],
                None,
            );
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(4), "{backend:?} snapshot: {err}");
            assert_eq!(
                state(&existing, &rt),
                before,
                "{backend:?}: snapshot changed the store"
            );
        }
        // The log is still writable as before: its writer was never fenced
        // and nothing was left half made.
        let after = run(
            backend,
            &["append", &existing.url, "--tag", "orders", "second"],
            None,
        );
        assert!(after.status.success(), "{backend:?}: {after:?}");
        let read = run(backend, &["read", &existing.url], None);
        let text = String::from_utf8_lossy(&read.stdout);
        assert_eq!(
            text.lines().filter(|l| l.starts_with('#')).count(),
            2,
            "{backend:?}: {text}"
        );
    }
    assert_eq!(checked, 4 * invalid_appends().len() * 4);
}

fn spawn_append(backend: Backend, url: &str, data: &str) -> Child {
    command(backend, &["append", url, "--tag", "race", "--json", data])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Plain appends racing as separate processes: every one appends or is
/// `locked` (exit 7), none is fenced (exit 5), and the log holds exactly
/// the appends that said so.
fn racing_plain_appends_fence_nobody(backend: Backend) {
    const ROUNDS: usize = 8;
    const RACERS: usize = 3;
    let root = tempfile::tempdir().unwrap();
    let t = target(backend, root.path(), "race");
    let first = run(
        backend,
        &["append", &t.url, "--create", "--tag", "race", "first"],
        None,
    );
    assert!(first.status.success(), "{first:?}");
    let mut appended = 1;
    let mut locked = 0;
    for round in 0..ROUNDS {
        let racers: Vec<Child> = (0..RACERS)
            .map(|i| spawn_append(backend, &t.url, &format!("r{round}-{i}")))
            .collect();
        let mut won = 0;
        for child in racers {
            let out = child.wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            match out.status.code() {
                Some(0) => won += 1,
                Some(7) => {
                    assert!(err.contains("(locked)"), "{err}");
                    locked += 1;
                }
                other => panic!("{backend:?} round {round}: exit {other:?}: {err}"),
            }
        }
        assert!(won >= 1, "{backend:?} round {round}: nobody appended");
        appended += won;
    }
    let read = run(backend, &["read", &t.url], None);
    assert!(read.status.success(), "{read:?}");
    let text = String::from_utf8_lossy(&read.stdout);
    assert_eq!(
        text.lines().filter(|l| l.starts_with('#')).count(),
        appended,
        "{text}"
    );
    eprintln!("{backend:?}: {appended} appended, {locked} locked, 0 fenced");
}

#[test]
fn racing_plain_appends_to_s3_fence_nobody() {
    racing_plain_appends_fence_nobody(Backend::S3);
}

#[test]
fn racing_plain_appends_to_azure_fence_nobody() {
    racing_plain_appends_fence_nobody(Backend::Azure);
}
