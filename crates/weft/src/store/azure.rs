//! Connection settings for an Azure Blob container, and building its store.
//!
//! [`AzureSettings`] is plain data: read it from the standard `AZURE_*`
//! environment variables (the names object_store's
//! `MicrosoftAzureBuilder::from_env` understands) with
//! [`AzureSettings::from_env`], override any field, then
//! [`AzureSettings::build`] an `Arc<dyn ObjectStore>` rooted at the prefix.
//!
//! The endpoint is the *account* URL. On Azure that is
//! `https://ACCOUNT.blob.core.windows.net` (the default); on the Azurite
//! emulator it is path-style, with the account as the first path segment
//! (`http://127.0.0.1:10000/devstoreaccount1`), which is how Azurite's own
//! connection strings spell it. Setting [`AzureSettings::use_emulator`]
//! only fills in the emulator's defaults (its well-known account and key,
//! `127.0.0.1:10000`, plain HTTP); explicit fields still win, so the same
//! code path serves Azure and an emulator with its own account.
//!
//! What differs between Azure and S3 once the store is built is decided in
//! [`outcome`](super::outcome), never here.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use serde::{Deserialize, Serialize};

use super::config::{client_options, parse_bool, retry_config, with_prefix};
use crate::error::{Error, ErrorKind, Result};

/// The account Azurite (and the older Azure Storage Emulator) creates by
/// default.
pub const EMULATOR_ACCOUNT: &str = "devstoreaccount1";

/// The published key of [`EMULATOR_ACCOUNT`]. Not a secret: Microsoft
/// documents it for every emulator installation.
pub const EMULATOR_ACCOUNT_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// Where Azurite's blob service listens unless told otherwise.
pub const EMULATOR_BLOB_URL: &str = "http://127.0.0.1:10000";

/// Connection settings for an Azure Blob container.
///
/// `None` fields fall back to object_store's defaults. Credentials are tried
/// in object_store's order: bearer token, account key, service principal
/// (client id + secret + tenant), SAS token; with none of them object_store
/// uses workload or managed identity (see [`AzureSettings::options`]).
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AzureSettings {
    /// Container name.
    pub container: String,
    /// Blob-name prefix inside the container ("" = container root).
    pub prefix: String,
    /// Storage account (`AZURE_STORAGE_ACCOUNT_NAME`); required unless
    /// [`Self::use_emulator`] is set.
    pub account: Option<String>,
    /// Account key (`AZURE_STORAGE_ACCOUNT_KEY`, or its aliases
    /// `AZURE_STORAGE_ACCESS_KEY` / `AZURE_STORAGE_MASTER_KEY`): Shared Key
    /// authorization.
    pub access_key: Option<String>,
    /// Shared access signature, percent-encoded as the portal shows it
    /// (`AZURE_STORAGE_SAS_TOKEN` or `AZURE_STORAGE_SAS_KEY`).
    pub sas_token: Option<String>,
    /// A bearer token (`AZURE_STORAGE_TOKEN`).
    pub bearer_token: Option<String>,
    /// Service principal client id (`AZURE_STORAGE_CLIENT_ID` or
    /// `AZURE_CLIENT_ID`).
    pub client_id: Option<String>,
    /// Service principal secret (`AZURE_STORAGE_CLIENT_SECRET` or
    /// `AZURE_CLIENT_SECRET`).
    pub client_secret: Option<String>,
    /// Tenant of the service principal (`AZURE_STORAGE_TENANT_ID` or
    /// `AZURE_TENANT_ID`).
    pub tenant_id: Option<String>,
    /// The account URL (`AZURE_STORAGE_ENDPOINT` or `AZURE_ENDPOINT`); see
    /// the module docs. Default: `https://ACCOUNT.blob.core.windows.net`, or
    /// `EMULATOR_BLOB_URL/ACCOUNT` with [`Self::use_emulator`].
    pub endpoint: Option<String>,
    /// Fill in the emulator's defaults (`AZURE_STORAGE_USE_EMULATOR`): its
    /// well-known account and key when none is given, its local endpoint
    /// (`AZURITE_BLOB_STORAGE_URL` if set), plain HTTP.
    pub use_emulator: bool,
    /// Allow plain `http://` endpoints (`AZURE_ALLOW_HTTP`).
    pub allow_http: bool,
    /// Further object_store Azure configuration keys (lower-case
    /// `AzureConfigKey` names such as `azure_federated_token_file` or
    /// `azure_msi_endpoint`), applied before the fields above. `from_env`
    /// copies `AZURE_FEDERATED_TOKEN_FILE`, `AZURE_AUTHORITY_HOST`,
    /// `AZURE_MSI_ENDPOINT`, `AZURE_OBJECT_ID`, `AZURE_MSI_RESOURCE_ID` and
    /// `AZURE_USE_AZURE_CLI` here.
    pub options: BTreeMap<String, String>,
    /// Per-request timeout (object_store's default: 30 s).
    pub request_timeout: Option<Duration>,
    /// Connect timeout (object_store's default: 5 s).
    pub connect_timeout: Option<Duration>,
    /// Retries object_store itself makes on 5xx and connection errors before
    /// a request fails (default 2, bounded by [`Self::http_retry_timeout`]).
    pub http_retries: Option<usize>,
    /// Upper bound of the time object_store spends on its own retries
    /// (default 10 s).
    pub http_retry_timeout: Option<Duration>,
}

/// Environment variables passed through to object_store as they are.
const PASSTHROUGH: &[(&str, &str)] = &[
    ("AZURE_FEDERATED_TOKEN_FILE", "azure_federated_token_file"),
    ("AZURE_AUTHORITY_HOST", "azure_authority_host"),
    ("AZURE_MSI_ENDPOINT", "azure_msi_endpoint"),
    ("AZURE_OBJECT_ID", "azure_object_id"),
    ("AZURE_MSI_RESOURCE_ID", "azure_msi_resource_id"),
    ("AZURE_USE_AZURE_CLI", "azure_use_azure_cli"),
];

impl fmt::Debug for AzureSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let redact = |v: &Option<String>| v.as_ref().map(|_| "<redacted>");
        f.debug_struct("AzureSettings")
            .field("container", &self.container)
            .field("prefix", &self.prefix)
            .field("account", &self.account)
            .field("access_key", &redact(&self.access_key))
            .field("sas_token", &redact(&self.sas_token))
            .field("bearer_token", &redact(&self.bearer_token))
            .field("client_id", &self.client_id)
            .field("client_secret", &redact(&self.client_secret))
            .field("tenant_id", &self.tenant_id)
            .field("endpoint", &self.endpoint)
            .field("use_emulator", &self.use_emulator)
            .field("allow_http", &self.allow_http)
            .field("options", &self.options.keys().collect::<Vec<_>>())
            .field("request_timeout", &self.request_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("http_retries", &self.http_retries)
            .field("http_retry_timeout", &self.http_retry_timeout)
            .finish()
    }
}

impl AzureSettings {
    /// Settings for `container`/`prefix` with nothing else set.
    pub fn new(container: impl Into<String>, prefix: impl Into<String>) -> Self {
        AzureSettings {
            container: container.into(),
            prefix: prefix.into(),
            ..AzureSettings::default()
        }
    }

    /// Settings for `container`/`prefix` from the process environment (the
    /// variables named on each field).
    ///
    /// Errors: [`ErrorKind::InvalidInput`] when `AZURE_STORAGE_USE_EMULATOR`
    /// or `AZURE_ALLOW_HTTP` is not a boolean.
    pub fn from_env(container: impl Into<String>, prefix: impl Into<String>) -> Result<Self> {
        AzureSettings::from_lookup(container, prefix, |key| std::env::var(key).ok())
    }

    /// Like [`AzureSettings::from_env`], reading variables through `lookup`
    /// (so callers and tests need not touch the process environment).
    pub fn from_lookup(
        container: impl Into<String>,
        prefix: impl Into<String>,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self> {
        let get = |key: &str| lookup(key).filter(|v| !v.is_empty());
        let first = |keys: &[&str]| keys.iter().find_map(|k| get(k));
        let flag = |key: &str| -> Result<bool> {
            match get(key) {
                None => Ok(false),
                Some(v) => parse_bool(&v)
                    .ok_or_else(|| Error::invalid_input(format!("{key}={v:?} is not true/false"))),
            }
        };
        let use_emulator = flag("AZURE_STORAGE_USE_EMULATOR")?;
        let account = get("AZURE_STORAGE_ACCOUNT_NAME");
        let mut endpoint = first(&["AZURE_STORAGE_ENDPOINT", "AZURE_ENDPOINT"]);
        if endpoint.is_none() && use_emulator {
            // object_store's variable for the emulator's blob URL (without
            // the account); kept so existing Azurite setups keep working.
            if let Some(url) = get("AZURITE_BLOB_STORAGE_URL") {
                let account = account.as_deref().unwrap_or(EMULATOR_ACCOUNT);
                endpoint = Some(format!("{}/{account}", url.trim_end_matches('/')));
            }
        }
        let options = PASSTHROUGH
            .iter()
            .filter_map(|(var, key)| get(var).map(|v| (key.to_string(), v)))
            .collect();
        Ok(AzureSettings {
            account,
            access_key: first(&[
                "AZURE_STORAGE_ACCOUNT_KEY",
                "AZURE_STORAGE_ACCESS_KEY",
                "AZURE_STORAGE_MASTER_KEY",
            ]),
            sas_token: first(&["AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGE_SAS_KEY"]),
            bearer_token: get("AZURE_STORAGE_TOKEN"),
            client_id: first(&["AZURE_STORAGE_CLIENT_ID", "AZURE_CLIENT_ID"]),
            client_secret: first(&["AZURE_STORAGE_CLIENT_SECRET", "AZURE_CLIENT_SECRET"]),
            tenant_id: first(&["AZURE_STORAGE_TENANT_ID", "AZURE_TENANT_ID"]),
            endpoint,
            use_emulator,
            allow_http: flag("AZURE_ALLOW_HTTP")?,
            options,
            ..AzureSettings::new(container, prefix)
        })
    }

    /// The account URL requests go to (see the module docs).
    ///
    /// Errors: [`ErrorKind::InvalidInput`] when there is no account and no
    /// emulator.
    pub fn account_url(&self) -> Result<String> {
        if let Some(endpoint) = &self.endpoint {
            return Ok(endpoint.trim_end_matches('/').to_string());
        }
        let account = self.effective_account()?;
        Ok(if self.use_emulator {
            format!("{EMULATOR_BLOB_URL}/{account}")
        } else {
            format!("https://{account}.blob.core.windows.net")
        })
    }

    fn effective_account(&self) -> Result<&str> {
        match (&self.account, self.use_emulator) {
            (Some(account), _) => Ok(account),
            (None, true) => Ok(EMULATOR_ACCOUNT),
            (None, false) => Err(Error::invalid_input(
                "no Azure storage account (set AZURE_STORAGE_ACCOUNT_NAME, or the emulator flag)",
            )),
        }
    }

    /// Builds the store, rooted at [`Self::prefix`] when it is not empty
    /// (every path the caller uses is relative to the prefix).
    ///
    /// No request is sent; wrong credentials or an unreachable endpoint show
    /// up on the first request. Errors: [`ErrorKind::InvalidInput`] for an
    /// invalid container name, no account, an endpoint that is not an
    /// `http(s)://` URL, an `http://` endpoint without [`Self::allow_http`]
    /// (the emulator allows it), a client secret without a client id and
    /// tenant, an unknown key in [`Self::options`], or settings object_store
    /// rejects (an account key that is not base64, for example).
    pub fn build(&self) -> Result<Arc<dyn ObjectStore>> {
        validate_container(&self.container)?;
        let account = self.effective_account()?;
        let url = self.account_url()?;
        let allow_http = self.allow_http || self.use_emulator;
        match url.split_once("://") {
            Some(("https", rest)) if !rest.is_empty() => {}
            Some(("http", rest)) if !rest.is_empty() && allow_http => {}
            Some(("http", _)) => {
                return Err(Error::invalid_input(format!(
                    "Azure endpoint {url:?} is plain http; set allow_http (AZURE_ALLOW_HTTP=true)"
                )));
            }
            _ => {
                return Err(Error::invalid_input(format!(
                    "Azure endpoint {url:?} is not an http(s) URL"
                )));
            }
        }
        if self.client_secret.is_some() && (self.client_id.is_none() || self.tenant_id.is_none()) {
            return Err(Error::invalid_input(
                "an Azure client secret needs a client id and a tenant id",
            ));
        }

        let mut builder = MicrosoftAzureBuilder::new();
        for (key, value) in &self.options {
            let parsed: AzureConfigKey = key.parse().map_err(|e| {
                Error::new(
                    ErrorKind::InvalidInput,
                    format!("unknown Azure option {key:?}"),
                )
                .with_source(e)
            })?;
            builder = builder.with_config(parsed, value);
        }
        // `with_client_options` replaces the whole ClientOptions, allow_http
        // included, so the client options go first and allow_http after.
        builder = builder
            .with_client_options(client_options(self.request_timeout, self.connect_timeout))
            .with_allow_http(allow_http)
            .with_retry(retry_config(self.http_retries, self.http_retry_timeout))
            .with_container_name(&self.container)
            .with_account(account)
            .with_endpoint(url);
        let emulator_key = (self.use_emulator
            && self.access_key.is_none()
            && self.sas_token.is_none()
            && self.bearer_token.is_none()
            && self.client_secret.is_none())
        .then_some(EMULATOR_ACCOUNT_KEY);
        if let Some(key) = self.access_key.as_deref().or(emulator_key) {
            builder = builder.with_access_key(key);
        }
        if let Some(sas) = &self.sas_token {
            builder = builder.with_config(AzureConfigKey::SasKey, sas);
        }
        if let Some(token) = &self.bearer_token {
            builder = builder.with_bearer_token_authorization(token);
        }
        if let Some(id) = &self.client_id {
            builder = builder.with_client_id(id);
        }
        if let Some(secret) = &self.client_secret {
            builder = builder.with_client_secret(secret);
        }
        if let Some(tenant) = &self.tenant_id {
            builder = builder.with_tenant_id(tenant);
        }
        let azure = builder.build().map_err(|e| {
            Error::new(
                ErrorKind::InvalidInput,
                format!("cannot configure Azure container {:?}", self.container),
            )
            .with_source(e)
        })?;
        let store: Arc<dyn ObjectStore> = Arc::new(azure);
        Ok(with_prefix(store, &self.prefix))
    }
}

/// Checks Azure's container naming rules: 3 to 63 characters, lowercase
/// letters, digits and single hyphens, starting and ending with a letter or
/// digit.
pub(crate) fn validate_container(container: &str) -> Result<()> {
    if container.is_empty() {
        return Err(Error::invalid_input(
            "azure location has no container (az://container/prefix)",
        ));
    }
    let chars_ok = container
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    let ends_ok = !container.starts_with('-') && !container.ends_with('-');
    if !chars_ok || !ends_ok || container.contains("--") || !(3..=63).contains(&container.len()) {
        return Err(Error::invalid_input(format!(
            "container name {container:?} is not valid (3 to 63 lowercase letters, digits and \
             single '-', starting and ending with a letter or digit)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn reads_the_standard_azure_variables() {
        let s = AzureSettings::from_lookup(
            "logs",
            "p",
            env(&[
                ("AZURE_STORAGE_ACCOUNT_NAME", "acct"),
                ("AZURE_STORAGE_ACCESS_KEY", EMULATOR_ACCOUNT_KEY),
                ("AZURE_STORAGE_ENDPOINT", "http://127.0.0.1:9/acct/"),
                ("AZURE_ALLOW_HTTP", "true"),
                ("AZURE_CLIENT_ID", "cid"),
                ("AZURE_FEDERATED_TOKEN_FILE", "/var/run/token"),
            ]),
        )
        .unwrap();
        assert_eq!(s.account.as_deref(), Some("acct"));
        assert_eq!(s.access_key.as_deref(), Some(EMULATOR_ACCOUNT_KEY));
        assert_eq!(s.client_id.as_deref(), Some("cid"));
        assert!(s.allow_http);
        assert!(!s.use_emulator);
        assert_eq!(s.account_url().unwrap(), "http://127.0.0.1:9/acct");
        assert_eq!(
            s.options
                .get("azure_federated_token_file")
                .map(String::as_str),
            Some("/var/run/token")
        );
        assert!(
            !format!("{s:?}").contains(EMULATOR_ACCOUNT_KEY),
            "the key is redacted"
        );
        s.build().unwrap();

        let err = AzureSettings::from_lookup(
            "logs",
            "",
            env(&[("AZURE_STORAGE_USE_EMULATOR", "perhaps")]),
        )
        .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidInput);
    }

    #[test]
    fn emulator_defaults_fill_only_what_is_missing() {
        let s = AzureSettings::from_lookup("logs", "", env(&[("AZURE_STORAGE_USE_EMULATOR", "1")]))
            .unwrap();
        assert_eq!(
            s.account_url().unwrap(),
            format!("{EMULATOR_BLOB_URL}/{EMULATOR_ACCOUNT}")
        );
        // Plain http is allowed for the emulator without asking.
        s.build().unwrap();

        let custom = AzureSettings::from_lookup(
            "logs",
            "",
            env(&[
                ("AZURE_STORAGE_USE_EMULATOR", "true"),
                ("AZURE_STORAGE_ACCOUNT_NAME", "mine"),
                ("AZURITE_BLOB_STORAGE_URL", "http://127.0.0.1:4711/"),
            ]),
        )
        .unwrap();
        assert_eq!(custom.account_url().unwrap(), "http://127.0.0.1:4711/mine");
        custom.build().unwrap();
    }

    #[test]
    fn azure_defaults_to_the_account_host() {
        let mut s = AzureSettings::new("logs", "");
        assert_eq!(s.build().unwrap_err().kind(), ErrorKind::InvalidInput);
        s.account = Some("acct".into());
        s.access_key = Some(EMULATOR_ACCOUNT_KEY.into());
        assert_eq!(
            s.account_url().unwrap(),
            "https://acct.blob.core.windows.net"
        );
        s.build().unwrap();
    }

    #[test]
    fn rejects_bad_settings_with_invalid_input() {
        let good = AzureSettings {
            account: Some("acct".into()),
            access_key: Some(EMULATOR_ACCOUNT_KEY.into()),
            ..AzureSettings::new("logs", "")
        };
        good.build().unwrap();
        let bad = [
            AzureSettings {
                endpoint: Some("http://127.0.0.1:9/acct".into()),
                ..good.clone()
            },
            AzureSettings {
                endpoint: Some("ftp://host".into()),
                ..good.clone()
            },
            AzureSettings {
                container: "Logs".into(),
                ..good.clone()
            },
            AzureSettings {
                access_key: Some("not base64!".into()),
                ..good.clone()
            },
            AzureSettings {
                client_secret: Some("s".into()),
                ..good.clone()
            },
            AzureSettings {
                options: [("azure_no_such_key".to_string(), "x".to_string())].into(),
                ..good.clone()
            },
        ];
        for s in bad {
            assert_eq!(
                s.build().unwrap_err().kind(),
                ErrorKind::InvalidInput,
                "{s:?}"
            );
        }
    }

    #[test]
    fn container_names_follow_azure_rules() {
        for ok in ["abc", "weft-test", "a1-b2-c3", &"a".repeat(63)] {
            validate_container(ok).unwrap();
        }
        for bad in [
            "",
            "ab",
            "-abc",
            "abc-",
            "a--b",
            "ABC",
            "a_b",
            "a.b",
            &"a".repeat(64),
        ] {
            assert_eq!(
                validate_container(bad).unwrap_err().kind(),
                ErrorKind::InvalidInput,
                "{bad:?}"
            );
        }
    }
}
