//! From a `LOG` argument to something to work on: a [`Log`] to write
//! (through the one function [`open_log`]), a read-only [`Log`] to read
//! and follow ([`follow`]), or a read-only object store (for the commands
//! that read manifests and segments directly).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use object_store::ObjectStore;
use weft::connect::{AzureSettings, Location, S3Settings};
use weft::objects::{DEFAULT_DEADLINE, RetryPolicy};
use weft::storage::bucket::{BucketFollower, BucketFollowerOptions, BucketOptions, BucketStorage};
use weft::storage::dir::{DirStorage, require_log};
use weft::{Error, ErrorKind, Log, Result};

/// Connection flags for `s3://` and `az://` locations; each overrides the
/// matching environment variable (`AWS_*` for S3, `AZURE_*` for Azure).
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct StoreArgs {
    /// Endpoint URL: for S3 the service (default: $AWS_ENDPOINT_URL, else
    /// AWS itself); for Azure the account URL (default:
    /// $AZURE_STORAGE_ENDPOINT, else https://ACCOUNT.blob.core.windows.net).
    #[arg(long, global = true, value_name = "URL")]
    endpoint: Option<String>,

    /// S3 region (default: $AWS_REGION, else us-east-1).
    #[arg(long, global = true)]
    region: Option<String>,

    /// Allow a plain http:// endpoint (default: $AWS_ALLOW_HTTP /
    /// $AZURE_ALLOW_HTTP).
    #[arg(long, global = true)]
    allow_http: bool,

    /// Where a bucket log's numbers are kept between runs, so that
    /// `append`, `read` and `tail` read only what changed since the last
    /// run instead of the whole log (one subdirectory per log and role;
    /// default: $XDG_CACHE_HOME/weft, else ~/.cache/weft). `none` keeps
    /// nothing. A directory another weft process is using is skipped.
    #[arg(long, global = true, env = "WEFT_CACHE_DIR", value_name = "DIR")]
    cache_dir: Option<String>,

    /// The longest a bucket operation may go on without progress, in
    /// seconds (default 30, at most a day): a store that stops answering
    /// fails the command with `unavailable` (exit 9) after this, or
    /// `indeterminate` for a write whose outcome is unknown.
    #[arg(long, global = true, value_name = "SECS", value_parser = crate::seconds::parse_deadline)]
    deadline: Option<Duration>,
}

/// What a command does with a bucket log, for its cache subdirectory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Writer,
    Reader,
}

impl StoreArgs {
    /// The cache directory for `role` on the log at `location`, if any.
    pub(crate) fn cache_for(&self, location: &Location, role: Role) -> Option<std::path::PathBuf> {
        let base = match self.cache_dir.as_deref() {
            Some("none") => return None,
            Some(dir) => std::path::PathBuf::from(dir),
            None => match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
                Some(xdg) => std::path::PathBuf::from(xdg).join("weft"),
                None => std::path::PathBuf::from(std::env::var_os("HOME")?)
                    .join(".cache")
                    .join("weft"),
            },
        };
        let text = location.to_string();
        let readable: String = text
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .take(80)
            .collect();
        let name = format!("{readable}-{:08x}", crc32c::crc32c(text.as_bytes()));
        let role = match role {
            Role::Writer => "writer",
            Role::Reader => "reader",
        };
        Some(base.join(name).join(role))
    }
}

/// `dir`, unless another weft process uses it or it cannot be used: then
/// nothing (the command reads what it needs from the bucket instead of
/// failing; a cache is never needed for correctness).
fn usable_cache(dir: Option<PathBuf>) -> Option<PathBuf> {
    let dir = dir?;
    match weft::storage::bucket::cache_dir_in_use(&dir) {
        Ok(false) => Some(dir),
        Ok(true) => {
            tracing::warn!(dir = %dir.display(), "the cache directory is in use; going without it");
            None
        }
        Err(e) => {
            tracing::warn!(dir = %dir.display(), error = %e, "cannot use the cache directory; going without it");
            None
        }
    }
}

impl StoreArgs {
    /// The `--deadline` (checked by the parser), or the library's default.
    pub(crate) fn deadline(&self) -> Duration {
        self.deadline.unwrap_or(DEFAULT_DEADLINE)
    }

    /// The retry policy every bucket operation of this command runs under.
    pub(crate) fn retry(&self) -> RetryPolicy {
        RetryPolicy::default().with_deadline(self.deadline())
    }

    /// The S3 settings for `bucket`/`prefix`: the environment (read through
    /// `lookup`), then these flags. Checked when built.
    pub(crate) fn s3_settings(
        &self,
        bucket: &str,
        prefix: &str,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<S3Settings> {
        let mut settings = S3Settings::from_lookup(bucket, prefix, lookup)?;
        if let Some(endpoint) = &self.endpoint {
            settings.endpoint = Some(endpoint.clone());
        }
        if let Some(region) = &self.region {
            settings.region = Some(region.clone());
        }
        if self.allow_http {
            settings.allow_http = true;
        }
        // A command line tool should answer quickly when the server is away,
        // and no request may outlive the deadline.
        let deadline = self.deadline();
        settings
            .connect_timeout
            .get_or_insert(Duration::from_secs(5).min(deadline));
        settings.request_timeout.get_or_insert(deadline);
        settings.http_retry_timeout.get_or_insert(deadline);
        settings.http_retries.get_or_insert(1);
        Ok(settings)
    }

    /// The Azure settings for `container`/`prefix`: the environment (read
    /// through `lookup`), then these flags. Checked when built.
    pub(crate) fn azure_settings(
        &self,
        container: &str,
        prefix: &str,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<AzureSettings> {
        let mut settings = AzureSettings::from_lookup(container, prefix, lookup)?;
        if let Some(endpoint) = &self.endpoint {
            settings.endpoint = Some(endpoint.clone());
        }
        if self.allow_http {
            settings.allow_http = true;
        }
        let deadline = self.deadline();
        settings
            .connect_timeout
            .get_or_insert(Duration::from_secs(5).min(deadline));
        settings.request_timeout.get_or_insert(deadline);
        settings.http_retry_timeout.get_or_insert(deadline);
        settings.http_retries.get_or_insert(1);
        Ok(settings)
    }
}

/// The process environment, as the settings read it.
fn process_env(key: &str) -> Option<String> {
    std::env::var(key).ok()
}

/// Parses a `LOG` / `STORE` argument.
pub(crate) fn parse(text: &str) -> Result<Location> {
    Location::parse(text)
}

pub(crate) use crate::create::Create;

/// Opens the shared log at `location` for reading and writing: the one
/// place that picks a backend.
///
/// * A plain directory opens the `dir` backend, which takes an exclusive
///   lock on it.
/// * `s3://` and `az://` open the bucket writer ([`BucketStorage`]), which
///   claims the log's epoch: any other writer of that log is fenced from
///   then on.
/// * `file://` is a read-only copy: its store refuses every write
///   ([`open_store`]), so opening a writer on it fails at its first write
///   with `ReadOnly` and leaves the directory as it was.
///
/// A bucket log's writer keeps a lease that shows it is alive: opening
/// one where a live writer holds the lease fails with `Locked`, naming it,
/// unless `take_over` (then the other writer is fenced, on purpose).
///
/// Errors: `NotFound` (no log there and `create` is [`Create::No`]),
/// `Locked` (another process has a `dir` log open, or a live bucket writer
/// holds the log), `ReadOnly` (`file://`), `PermissionDenied`,
/// `Unavailable`, `Corrupt`, and the backend's I/O kinds.
pub(crate) async fn open_log(
    location: &Location,
    create: Create,
    take_over: bool,
    args: &StoreArgs,
) -> Result<Log> {
    match location {
        Location::Dir { path } => {
            if create == Create::No {
                require_log(path)?;
            }
            Ok(Log::new(DirStorage::open(path).await?))
        }
        Location::S3 { .. } | Location::Azure { .. } | Location::File { .. } => {
            let store = open_store(location, args)?;
            if create == Create::No {
                require_bucket_log(&store, location).await?;
            }
            let cache_dir = usable_cache(args.cache_for(location, Role::Writer));
            let options = BucketOptions::default()
                .with_retry(args.retry())
                .with_take_over(take_over)
                .with_writer_name(Some("the weft command".to_owned()))
                .with_cache_dir(cache_dir);
            let storage = BucketStorage::open(store, "", options).await?;
            Ok(Log::new(storage))
        }
        _ => Err(not_yet(location)),
    }
}

/// A read-only follower and a way to learn why it stopped tailing.
pub(crate) struct Followed {
    pub(crate) log: Log,
    stop_error: Box<dyn Fn() -> Option<Error> + Send + Sync>,
}

impl Followed {
    /// The error that stopped the follower's tailing, if one did (its
    /// subscriptions then end).
    pub(crate) fn stop_error(&self) -> Option<Error> {
        (self.stop_error)()
    }

    /// Closes the follower.
    pub(crate) async fn close(self) {
        if let Err(e) = self.log.close().await {
            tracing::warn!(error = %e, "closing the log failed");
        }
    }
}

/// Opens a read-only follower of the log at `location`, looking for new
/// entries every `poll`: it serves reads and tails the log, and never
/// writes, locks or fences anything.
///
/// * A directory: a [`DirFollower`](weft::storage::dir::DirFollower), which judges the files as opening the
///   log would (what that refuses it refuses, what that cuts it leaves out)
///   and takes no lock, so a writer keeps writing; its own log index is
///   kept in the user's cache ([`crate::index_cache`]).
/// * A bucket (`s3://`, `az://`, `file://`): a [`BucketFollower`].
///
/// Errors: `NotFound` (no log), `InvalidInput` (bad poll interval, not a
/// directory), `Corrupt`, and the store's or filesystem's kinds.
pub(crate) async fn follow(
    location: &Location,
    args: &StoreArgs,
    poll: std::time::Duration,
) -> Result<Followed> {
    if let Location::Dir { path } = location {
        let follower = Arc::new(crate::index_cache::dir_follower(path, poll).await?);
        let watched = Arc::clone(&follower);
        return Ok(Followed {
            log: Log::from_arc(follower),
            stop_error: Box::new(move || watched.stop_error()),
        });
    }
    let store = open_store(location, args)?;
    require_bucket_log(&store, location).await?;
    let cache_dir = usable_cache(args.cache_for(location, Role::Reader));
    let options = BucketFollowerOptions::default()
        .with_poll_interval(poll)
        .with_cache_dir(cache_dir)
        .with_retry(args.retry());
    let follower = BucketFollower::open(store, "", options).await?;
    let follower = Arc::new(follower);
    let watched = Arc::clone(&follower);
    Ok(Followed {
        log: Log::from_arc(follower),
        stop_error: Box::new(move || watched.stop_error()),
    })
}

/// Opens a follower of the `LOG` argument `text`: a PostgreSQL log through
/// its backend (any number of handles may be open, nothing is locked or
/// fenced; `poll` is its fallback when a notification is lost), any other
/// location as [`follow`] does.
///
/// Errors: `InvalidInput` for a bad location; as [`follow`] or
/// PostgreSQL's open.
pub(crate) async fn follow_arg(
    text: &str,
    args: &StoreArgs,
    poll: std::time::Duration,
) -> Result<Followed> {
    if crate::remote::is_remote(text) {
        let log = crate::remote::open(text, args.deadline()).await?;
        return Ok(Followed {
            log,
            stop_error: Box::new(|| None),
        });
    }
    if let Some(pg) = crate::pg::location(text) {
        let log = crate::pg::open_log(pg?, poll).await?;
        return Ok(Followed {
            log,
            stop_error: Box::new(|| None),
        });
    }
    follow(&parse(text)?, args, poll).await
}

/// `NotFound` unless the store holds a bucket log's manifest.
async fn require_bucket_log(store: &Arc<dyn ObjectStore>, location: &Location) -> Result<()> {
    match crate::bucket::size(store, crate::bucket::DEFAULT_MANIFEST).await? {
        Some(_) => Ok(()),
        None => Err(Error::new(
            ErrorKind::NotFound,
            format!(
                "no log at {location}: there is no {} object (create one with `weft append --create`)",
                crate::bucket::DEFAULT_MANIFEST
            ),
        )),
    }
}

/// The object store at `location` (`s3://`, `az://` or `file://`).
/// Nothing is created: a missing `file://` directory is `NotFound`.
///
/// A `file://` location is a copy of a bucket and documented read-only:
/// its store ([`weft::connect::file_store`]) is a `ReadOnlyStore`, which
/// refuses every write (`ReadOnly`) whichever command or library path
/// attempts it.
///
/// Errors: `InvalidInput` for a plain directory (that is a `dir` log) or
/// bad S3 settings; `NotFound`.
pub(crate) fn open_store(location: &Location, args: &StoreArgs) -> Result<Arc<dyn ObjectStore>> {
    match location {
        Location::S3 { bucket, prefix } => args.s3_settings(bucket, prefix, process_env)?.build(),
        Location::Azure { container, prefix } => {
            args.azure_settings(container, prefix, process_env)?.build()
        }
        Location::File { path } => {
            require_dir(path)?;
            weft::connect::file_store(path)
        }
        Location::Dir { path } => Err(Error::invalid_input(format!(
            "{} is a plain directory, which names a `dir` log; a bucket is s3://bucket/prefix \
             or file://{}",
            path.display(),
            absolute(path).display()
        ))),
        _ => Err(not_yet(location)),
    }
}

/// For a kind of location the library knows and this command does not
/// (yet): `Location` is non-exhaustive, so a backend added to the library
/// (PostgreSQL) reaches here until the command learns it.
pub(crate) fn not_yet(location: &Location) -> Error {
    Error::unsupported(format!(
        "{location}: this kind of location is not supported here yet"
    ))
}

/// `NotFound` unless `path` is an existing directory.
pub(crate) fn require_dir(path: &Path) -> Result<()> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(Error::invalid_input(format!(
            "{} is not a directory",
            path.display()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Error::new(
            ErrorKind::NotFound,
            format!("no log at {}: the directory does not exist", path.display()),
        )),
        Err(e) => Err(Error::io(format!("stat {}", path.display()), e)),
    }
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}
