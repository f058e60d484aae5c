//! Connecting to where a log lives: parsing a location a user typed, and
//! building the object store for it from settings and the environment.
//!
//! This is configuration, for programs that take a location from a person
//! (the `weft` command, the benchmarks, a service's config file); the
//! library's own object-store semantics (what an outcome means, retries,
//! wrappers) are in `objects` and take any
//! `Arc<dyn ObjectStore>`, however it was made.
//!
//! * [`Location`] — `s3://bucket/prefix`, `az://container/prefix`,
//!   `file:///path` or a plain directory; pure parsing, always available.
//! * [`S3Settings`] (feature `aws`) and [`AzureSettings`] (feature
//!   `azure`) — connection settings read from the standard `AWS_*` and
//!   `AZURE_*` variables and overridable field by field;
//!   [`StoreSettings`] carries whichever are built in.
//! * [`build_store`] — the store for a location; [`file_store`] — a
//!   `file://` copy of a bucket, read-only.
//!
//! Every value a user can pass is checked here, before it reaches
//! object_store (whose request signer panics on a malformed endpoint or a
//! header value with a line break): a bad one is
//! [`ErrorKind::InvalidInput`], a configuration error no retry fixes.

#[cfg(feature = "azure")]
mod azure;
mod env;
#[cfg(any(feature = "aws", feature = "azure"))]
mod http;
mod location;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "aws")]
mod s3;

use std::path::Path;
use std::sync::Arc;

use object_store::ObjectStore;
use object_store::local::LocalFileSystem;
use serde::{Deserialize, Serialize};

#[cfg(feature = "azure")]
pub use azure::{AzureSettings, EMULATOR_ACCOUNT, EMULATOR_ACCOUNT_KEY, EMULATOR_BLOB_URL};
pub use location::Location;
#[cfg(feature = "postgres")]
pub use postgres::{MAX_LOG_NAME_BYTES, PgLocation, PgSslMode, validate_log_name};
#[cfg(feature = "aws")]
pub use s3::S3Settings;

use crate::error::{Error, ErrorKind, Result};
use crate::objects::ReadOnlyStore;

/// The connection settings of every kind of object store a [`Location`]
/// can name and this build of weft supports; [`build_store`] uses the part
/// that matches the location (its bucket or container and prefix come from
/// the location).
///
/// `&S3Settings` and `&AzureSettings` convert into it, so a caller that only
/// deals with one cloud passes its settings as they are.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct StoreSettings {
    /// Used for [`Location::S3`].
    #[cfg(feature = "aws")]
    pub s3: S3Settings,
    /// Used for [`Location::Azure`].
    #[cfg(feature = "azure")]
    pub azure: AzureSettings,
}

impl StoreSettings {
    /// The settings of every built-in cloud from the process environment
    /// (see [`S3Settings::from_env`] and [`AzureSettings::from_env`]).
    ///
    /// Errors: [`ErrorKind::InvalidInput`] for a boolean variable that is
    /// not a boolean.
    pub fn from_env() -> Result<Self> {
        StoreSettings::from_lookup(env::process)
    }

    /// Like [`StoreSettings::from_env`], reading variables through
    /// `lookup`.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let _ = &lookup;
        Ok(StoreSettings {
            #[cfg(feature = "aws")]
            s3: S3Settings::from_lookup("", "", &lookup)?,
            #[cfg(feature = "azure")]
            azure: AzureSettings::from_lookup("", "", &lookup)?,
        })
    }
}

#[cfg(feature = "aws")]
impl From<S3Settings> for StoreSettings {
    fn from(s3: S3Settings) -> Self {
        StoreSettings {
            s3,
            ..StoreSettings::default()
        }
    }
}

#[cfg(feature = "aws")]
impl From<&S3Settings> for StoreSettings {
    fn from(s3: &S3Settings) -> Self {
        StoreSettings::from(s3.clone())
    }
}

#[cfg(feature = "azure")]
impl From<AzureSettings> for StoreSettings {
    fn from(azure: AzureSettings) -> Self {
        StoreSettings {
            azure,
            ..StoreSettings::default()
        }
    }
}

#[cfg(feature = "azure")]
impl From<&AzureSettings> for StoreSettings {
    fn from(azure: &AzureSettings) -> Self {
        StoreSettings::from(azure.clone())
    }
}

impl From<&StoreSettings> for StoreSettings {
    fn from(settings: &StoreSettings) -> Self {
        settings.clone()
    }
}

/// Builds the object store for a [`Location::S3`] or [`Location::Azure`]
/// (with the matching part of `settings` for everything but the bucket or
/// container and the prefix) or a [`Location::File`] (see [`file_store`]:
/// a read-only copy).
///
/// Errors: [`ErrorKind::InvalidInput`] for a [`Location::Dir`] (that is the
/// `dir` backend, not an object store) and for bad settings (see
/// [`S3Settings::build`], [`AzureSettings::build`]);
/// [`ErrorKind::Unsupported`] for a cloud this build of weft leaves out
/// (features `aws`, `azure`); as [`file_store`] for a `file://` location.
pub fn build_store(
    location: &Location,
    settings: impl Into<StoreSettings>,
) -> Result<Arc<dyn ObjectStore>> {
    let settings: StoreSettings = settings.into();
    #[cfg(not(all(feature = "aws", feature = "azure")))]
    let _ = &settings;
    match location {
        #[cfg(feature = "aws")]
        Location::S3 { bucket, prefix } => S3Settings {
            bucket: bucket.clone(),
            prefix: prefix.clone(),
            ..settings.s3
        }
        .build(),
        #[cfg(not(feature = "aws"))]
        Location::S3 { .. } => Err(not_built(location, "aws")),
        #[cfg(feature = "azure")]
        Location::Azure { container, prefix } => AzureSettings {
            container: container.clone(),
            prefix: prefix.clone(),
            ..settings.azure
        }
        .build(),
        #[cfg(not(feature = "azure"))]
        Location::Azure { .. } => Err(not_built(location, "azure")),
        Location::File { path } => file_store(path),
        Location::Dir { path } => Err(Error::invalid_input(format!(
            "{} is a plain directory (the dir backend), not an object store; \
             use file://{} for an object store in a directory",
            path.display(),
            path.display()
        ))),
        #[cfg(feature = "postgres")]
        Location::Postgres(pg) => Err(Error::invalid_input(format!(
            "{pg} is a PostgreSQL log, not an object store; open it with PgStorage"
        ))),
    }
}

/// The object store of a `file://` location: a directory holding a copy
/// of a bucket, which is read-only. object_store's local files have no
/// conditional update (the manifest's CAS) and a copy is for reading, so
/// the store is a `ReadOnlyStore` that refuses every write with
/// [`ErrorKind::ReadOnly`], whichever code path attempts it (a writer's
/// claim, a trim, a lease, a GC delete). Nothing is created.
///
/// Errors: [`ErrorKind::NotFound`] when the directory does not exist;
/// [`ErrorKind::InvalidInput`] when `path` is not a directory; I/O kinds.
pub fn file_store(path: &Path) -> Result<Arc<dyn ObjectStore>> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => {
            return Err(Error::invalid_input(format!(
                "{} is not a directory",
                path.display()
            )));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::new(
                ErrorKind::NotFound,
                format!("{} does not exist", path.display()),
            ));
        }
        Err(e) => return Err(Error::io(format!("stat {}", path.display()), e)),
    }
    let fs = LocalFileSystem::new_with_prefix(path).map_err(|e| {
        Error::new(
            ErrorKind::InvalidInput,
            format!("cannot use {} as an object store", path.display()),
        )
        .with_source(e)
    })?;
    let name = Location::File {
        path: path.to_path_buf(),
    }
    .to_string();
    Ok(ReadOnlyStore::wrap(Arc::new(fs), name))
}

#[cfg(not(all(feature = "aws", feature = "azure")))]
fn not_built(location: &Location, feature: &str) -> Error {
    Error::unsupported(format!(
        "{location}: this build of weft has no support for it (cargo feature `{feature}`)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_locations_are_not_object_stores() {
        let err = build_store(
            &Location::parse("/tmp/x").unwrap(),
            StoreSettings::default(),
        )
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
    }

    #[tokio::test]
    async fn a_file_location_is_a_read_only_copy_that_must_exist() {
        use object_store::path::Path as Key;
        let dir = tempfile::tempdir().unwrap();
        let missing = Location::parse(&format!("file://{}/sub", dir.path().display())).unwrap();
        let err = build_store(&missing, StoreSettings::default()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::NotFound);
        assert!(!dir.path().join("sub").exists(), "nothing created");
        std::fs::write(dir.path().join("manifest"), b"m").unwrap();
        let loc = Location::parse(&format!("file://{}", dir.path().display())).unwrap();
        let store = build_store(&loc, StoreSettings::default()).unwrap();
        let got = store.get(&Key::from("manifest")).await.unwrap();
        assert_eq!(got.bytes().await.unwrap().as_ref(), b"m");
        let err = store
            .put(
                &Key::from("manifest"),
                object_store::PutPayload::from_static(b"x"),
            )
            .await
            .unwrap_err();
        let err = crate::objects::to_error(crate::objects::StoreOp::Put, "manifest", err);
        assert_eq!(err.kind(), ErrorKind::ReadOnly);
        assert_eq!(std::fs::read(dir.path().join("manifest")).unwrap(), b"m");
        let file = Location::parse(&format!("file://{}/manifest", dir.path().display())).unwrap();
        let err = build_store(&file, StoreSettings::default()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
    }

    #[cfg(not(feature = "aws"))]
    #[test]
    fn a_cloud_left_out_of_the_build_is_unsupported() {
        let loc = Location::parse("s3://logs/p").unwrap();
        let err = build_store(&loc, StoreSettings::default()).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Unsupported);
    }

    #[cfg(all(feature = "aws", feature = "azure"))]
    #[test]
    fn build_store_takes_either_clouds_settings() {
        let azure = AzureSettings {
            account: Some("acct".into()),
            access_key: Some(EMULATOR_ACCOUNT_KEY.into()),
            endpoint: Some("http://127.0.0.1:9/acct".into()),
            allow_http: true,
            ..AzureSettings::default()
        };
        let s3 = S3Settings {
            endpoint: Some("http://127.0.0.1:9".into()),
            allow_http: true,
            ..S3Settings::default()
        };
        let az = Location::parse("az://logs/p").unwrap();
        let bucket = Location::parse("s3://logs/p").unwrap();
        build_store(&az, &azure).unwrap();
        build_store(&bucket, &s3).unwrap();
        let both = StoreSettings { s3, azure };
        build_store(&az, &both).unwrap();
        build_store(&bucket, &both).unwrap();
        // Azure settings alone say nothing about an account for S3 and the
        // reverse: an Azure location with only S3 settings has no account.
        let err = build_store(&az, &both.s3).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
    }
}
