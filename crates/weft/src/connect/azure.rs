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
//! [`objects::outcome`](crate::objects::outcome), never here.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use object_store::ObjectStore;
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use serde::{Deserialize, Serialize};

use super::env::{self, Env};
use super::http;
use super::location::{validate_container, validate_prefix};
use crate::error::{Error, ErrorKind, Result};
use crate::objects::with_prefix;

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
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
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
    /// Further object_store Azure configuration keys for the credential
    /// sources that have no field here (lower-case `AzureConfigKey` names:
    /// `azure_federated_token_file`, `azure_authority_host`,
    /// `azure_msi_endpoint`, `azure_object_id`, `azure_msi_resource_id`,
    /// `azure_use_azure_cli`, and `azure_skip_signature`,
    /// `azure_disable_tagging`), applied before the fields above; a key
    /// that has a field, or any other key, is refused. `from_env` copies
    /// `AZURE_FEDERATED_TOKEN_FILE`, `AZURE_AUTHORITY_HOST`,
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

setters! {
    AzureSettings {
        with_container => container: String,
        with_prefix => prefix: String,
        with_account => account: Option<String>,
        with_access_key => access_key: Option<String>,
        with_sas_token => sas_token: Option<String>,
        with_bearer_token => bearer_token: Option<String>,
        with_client_id => client_id: Option<String>,
        with_client_secret => client_secret: Option<String>,
        with_tenant_id => tenant_id: Option<String>,
        with_endpoint => endpoint: Option<String>,
        with_use_emulator => use_emulator: bool,
        with_allow_http => allow_http: bool,
        with_options => options: BTreeMap<String, String>,
        with_request_timeout => request_timeout: Option<Duration>,
        with_connect_timeout => connect_timeout: Option<Duration>,
        with_http_retries => http_retries: Option<usize>,
        with_http_retry_timeout => http_retry_timeout: Option<Duration>,
    }
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
    /// variables named on each field). Empty variables count as unset.
    ///
    /// Errors: [`ErrorKind::InvalidInput`] when `AZURE_STORAGE_USE_EMULATOR`
    /// or `AZURE_ALLOW_HTTP` is not a boolean. The other values are checked
    /// by [`Self::build`].
    pub fn from_env(container: impl Into<String>, prefix: impl Into<String>) -> Result<Self> {
        AzureSettings::from_lookup(container, prefix, env::process)
    }

    /// Like [`AzureSettings::from_env`], reading variables through `lookup`
    /// (so callers and tests need not touch the process environment).
    pub fn from_lookup(
        container: impl Into<String>,
        prefix: impl Into<String>,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self> {
        let env = Env::new(lookup);
        let use_emulator = env.flag("AZURE_STORAGE_USE_EMULATOR")?;
        let account = env.get("AZURE_STORAGE_ACCOUNT_NAME");
        let mut endpoint = env.first(&["AZURE_STORAGE_ENDPOINT", "AZURE_ENDPOINT"]);
        if endpoint.is_none() && use_emulator {
            // object_store's variable for the emulator's blob URL (without
            // the account); kept so existing Azurite setups keep working.
            if let Some(url) = env.get("AZURITE_BLOB_STORAGE_URL") {
                let account = account.as_deref().unwrap_or(EMULATOR_ACCOUNT);
                endpoint = Some(format!("{}/{account}", url.trim_end_matches('/')));
            }
        }
        let options = PASSTHROUGH
            .iter()
            .filter_map(|(var, key)| env.get(var).map(|v| (key.to_string(), v)))
            .collect();
        Ok(AzureSettings {
            account,
            access_key: env.first(&[
                "AZURE_STORAGE_ACCOUNT_KEY",
                "AZURE_STORAGE_ACCESS_KEY",
                "AZURE_STORAGE_MASTER_KEY",
            ]),
            sas_token: env.first(&["AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGE_SAS_KEY"]),
            bearer_token: env.get("AZURE_STORAGE_TOKEN"),
            client_id: env.first(&["AZURE_STORAGE_CLIENT_ID", "AZURE_CLIENT_ID"]),
            client_secret: env.first(&["AZURE_STORAGE_CLIENT_SECRET", "AZURE_CLIENT_SECRET"]),
            tenant_id: env.first(&["AZURE_STORAGE_TENANT_ID", "AZURE_TENANT_ID"]),
            endpoint,
            use_emulator,
            allow_http: env.flag("AZURE_ALLOW_HTTP")?,
            options,
            ..AzureSettings::new(container, prefix)
        })
    }

    /// The account URL requests go to (see the module docs), checked and
    /// normalized.
    ///
    /// Errors: [`ErrorKind::InvalidInput`] when there is no account and no
    /// emulator, for an account name that is not 1 to 64 letters, digits,
    /// `-`, `_` or `.`, and for an endpoint that is not an
    /// `http(s)://host[:port][/path]` URL or is plain `http://` without
    /// [`Self::allow_http`] (the emulator allows it).
    pub fn account_url(&self) -> Result<String> {
        let account = self.effective_account()?;
        let url = match &self.endpoint {
            Some(endpoint) => endpoint.clone(),
            None if self.use_emulator => format!("{EMULATOR_BLOB_URL}/{account}"),
            None => format!("https://{account}.blob.core.windows.net"),
        };
        let allow = "allow_http or AZURE_ALLOW_HTTP=true";
        http::endpoint(
            "Azure endpoint",
            &url,
            self.allow_http || self.use_emulator,
            allow,
        )
    }

    fn effective_account(&self) -> Result<&str> {
        let account = match (&self.account, self.use_emulator) {
            (Some(account), _) => account,
            (None, true) => EMULATOR_ACCOUNT,
            (None, false) => {
                return Err(Error::invalid_input(
                    "no Azure storage account (set AZURE_STORAGE_ACCOUNT_NAME, or the emulator \
                     flag)",
                ));
            }
        };
        http::name("Azure storage account", account)?;
        Ok(account)
    }

    /// Builds the store, rooted at [`Self::prefix`] when it is not empty
    /// (every path the caller uses is relative to the prefix).
    ///
    /// No request is sent; wrong credentials or an unreachable endpoint show
    /// up on the first request. Errors: as [`Self::to_builder`].
    pub fn build(&self) -> Result<Arc<dyn ObjectStore>> {
        let azure = self.to_builder()?.build().map_err(|e| {
            Error::new(
                ErrorKind::InvalidInput,
                format!("cannot configure Azure container {:?}", self.container),
            )
            .with_source(e)
        })?;
        let store: Arc<dyn ObjectStore> = Arc::new(azure);
        Ok(with_prefix(store, &self.prefix))
    }

    /// Checks the settings and returns object_store's builder configured
    /// with them, for a caller that adds what these settings do not cover
    /// (an HTTP connector, say) before building. The prefix is not applied:
    /// wrap the built store with `with_prefix`.
    ///
    /// Errors: [`ErrorKind::InvalidInput`] for an invalid container name or
    /// prefix, no account or a bad one, a bad endpoint (see
    /// [`Self::account_url`]), a bearer token that is not printable ASCII,
    /// a client or tenant id that is not a plain name, a client secret
    /// without a client id and tenant, an unknown key in [`Self::options`],
    /// or settings object_store rejects when building (an account key that
    /// is not base64, for example).
    pub fn to_builder(&self) -> Result<MicrosoftAzureBuilder> {
        validate_container(&self.container)?;
        validate_prefix(&self.prefix)?;
        let account = self.effective_account()?;
        let url = self.account_url()?;
        let allow_http = self.allow_http || self.use_emulator;
        if self.client_secret.is_some() && (self.client_id.is_none() || self.tenant_id.is_none()) {
            return Err(Error::invalid_input(
                "an Azure client secret needs a client id and a tenant id",
            ));
        }

        let mut builder = MicrosoftAzureBuilder::new();
        for (key, value) in &self.options {
            builder = builder.with_config(option(key, value, self.allow_http)?, value);
        }
        // `with_client_options` replaces the whole ClientOptions, allow_http
        // included, so the client options go first and allow_http after.
        builder = builder
            .with_client_options(http::client_options(
                self.request_timeout,
                self.connect_timeout,
            ))
            .with_allow_http(allow_http)
            .with_retry(http::retry_config(
                self.http_retries,
                self.http_retry_timeout,
            ))
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
            http::header_token("the Azure bearer token", token)?;
            builder = builder.with_bearer_token_authorization(token);
        }
        if let Some(id) = &self.client_id {
            http::name("Azure client id", id)?;
            builder = builder.with_client_id(id);
        }
        if let Some(secret) = &self.client_secret {
            builder = builder.with_client_secret(secret);
        }
        if let Some(tenant) = &self.tenant_id {
            http::name("Azure tenant id", tenant)?;
            builder = builder.with_tenant_id(tenant);
        }
        Ok(builder)
    }
}

/// Checks one of [`AzureSettings::options`]: a key weft passes through,
/// and a value that object_store will not choke on (the token endpoints
/// become request URLs, which panic in object_store's client when they do
/// not parse).
fn option(key: &str, value: &str, allow_http: bool) -> Result<AzureConfigKey> {
    let parsed: AzureConfigKey = key.parse().map_err(|e| {
        Error::new(
            ErrorKind::InvalidInput,
            format!("unknown Azure option {key:?}"),
        )
        .with_source(e)
    })?;
    match parsed {
        // The instance metadata service answers plain http by design.
        AzureConfigKey::MsiEndpoint => {
            http::endpoint("Azure option azure_msi_endpoint", value, true, "")?;
        }
        AzureConfigKey::AuthorityHost => {
            let allow = "allow_http or AZURE_ALLOW_HTTP=true";
            http::endpoint(
                "Azure option azure_authority_host",
                value,
                allow_http,
                allow,
            )?;
        }
        AzureConfigKey::ObjectId => http::name("Azure option azure_object_id", value)?,
        AzureConfigKey::FederatedTokenFile
        | AzureConfigKey::MsiResourceId
        | AzureConfigKey::UseAzureCli
        | AzureConfigKey::SkipSignature
        | AzureConfigKey::DisableTagging => {
            if value.chars().any(char::is_control) {
                return Err(Error::invalid_input(format!(
                    "Azure option {key:?} has a control character in its value"
                )));
            }
        }
        _ => {
            return Err(Error::invalid_input(format!(
                "Azure option {key:?} is not passed through: set the matching field of \
                 AzureSettings, if there is one"
            )));
        }
    }
    Ok(parsed)
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
}
