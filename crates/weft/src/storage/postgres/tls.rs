//! TLS to the server, with rustls: the connector every connection of a
//! handle uses, built from the location's `sslmode` and `sslrootcert`.
//!
//! What each mode checks follows libpq, so a URL that works with `psql`
//! means the same here:
//!
//! * `disable` — no TLS (the connector is never asked);
//! * `prefer`, and `require` without `sslrootcert` — encrypted, the
//!   server's certificate not checked (only that the handshake is signed by
//!   the key it presents);
//! * `require` with `sslrootcert`, and `verify-ca` — the certificate must
//!   chain to a trusted root, whatever name it carries;
//! * `verify-full` — and it must name the host.
//!
//! Trusted roots: the PEM file `sslrootcert` names, or with
//! `sslrootcert=system` (and by default in the verify modes) the operating
//! system's store.
//!
//! rustls with the ring provider, which the HTTP stack builds already, and
//! `tokio-postgres-rustls` to hand it to tokio-postgres: the adapter that
//! crate's users maintain, instead of a hand-written `MakeTlsConnect`.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::connect::{PgLocation, PgSslMode};
use crate::error::{Error, Result};

/// The connector for `location`'s connections.
///
/// Errors: `InvalidInput` when `sslrootcert` cannot be read, holds no
/// certificate, or the roots cannot be used.
pub(super) fn connector(location: &PgLocation) -> Result<MakeRustlsConnect> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::internal(format!("TLS protocol versions: {e}")))?;
    let mode = location.ssl_mode();
    let root_file = location.ssl_root_cert();
    let checked = match mode {
        PgSslMode::VerifyCa | PgSslMode::VerifyFull => true,
        PgSslMode::Require => root_file.is_some(),
        _ => false,
    };
    let algorithms = provider.signature_verification_algorithms;
    let verifier: Arc<dyn ServerCertVerifier> = if checked {
        let roots = Arc::new(roots(root_file.unwrap_or("system"))?);
        let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider)
            .build()
            .map_err(|e| Error::invalid_input(format!("the trusted TLS roots: {e}")))?;
        if mode == PgSslMode::VerifyFull {
            webpki
        } else {
            Arc::new(AnyName(webpki))
        }
    } else {
        Arc::new(Unchecked(algorithms))
    };
    let config = builder
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}

/// The roots `source` names: `system`, or a PEM file.
fn roots(source: &str) -> Result<RootCertStore> {
    let mut store = RootCertStore::empty();
    if source == "system" {
        let found = rustls_native_certs::load_native_certs();
        let (added, _) = store.add_parsable_certificates(found.certs);
        if added == 0 {
            return Err(Error::invalid_input(
                "sslrootcert=system: the system's certificate store holds no usable root",
            ));
        }
        return Ok(store);
    }
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(source)
        .and_then(|certs| certs.collect())
        .map_err(|e| Error::invalid_input(format!("sslrootcert {source:?}: {e}")))?;
    let (added, _) = store.add_parsable_certificates(certs);
    if added == 0 {
        return Err(Error::invalid_input(format!(
            "sslrootcert {source:?} holds no usable certificate"
        )));
    }
    Ok(store)
}

/// `sslmode=verify-ca`: the chain is checked, the name is not.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `sslmode=prefer`/`require` without roots: the certificate is taken as
/// it comes (libpq's meaning of those modes); the handshake's signatures
/// are still checked against it.
#[derive(Debug)]
struct Unchecked(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

/// Whether `err` (a failed connection) was a TLS failure of ours: the
/// server's certificate refused, or the handshake failed. That is a
/// configuration error (the roots, the mode, the host name), not an
/// outage to retry.
/// The first of `config`'s TCP hosts (as `host:port`) whose server
/// answers PostgreSQL's `SSLRequest` with `N` (no TLS here), if one does.
/// A host that cannot be reached, or answers anything else, is not one:
/// its failure stays what it was.
pub(super) async fn refuses_tls(
    config: &tokio_postgres::Config,
    timeout: std::time::Duration,
) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // Length 8, then the request code 80877103 (1234 << 16 | 5679).
    const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];
    let ports = config.get_ports();
    for (i, host) in config.get_hosts().iter().enumerate() {
        let tokio_postgres::config::Host::Tcp(name) = host else {
            continue;
        };
        let port = ports.get(i).or(ports.first()).copied().unwrap_or(5432);
        let ask = async {
            let mut stream = tokio::net::TcpStream::connect((name.as_str(), port))
                .await
                .ok()?;
            stream.write_all(&SSL_REQUEST).await.ok()?;
            let mut answer = [0u8; 1];
            stream.read_exact(&mut answer).await.ok()?;
            Some(answer[0])
        };
        if let Ok(Some(b'N')) = tokio::time::timeout(timeout, ask).await {
            return Some(format!("{name}:{port}"));
        }
    }
    None
}

pub(super) fn is_tls_failure(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut at: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = at {
        if e.downcast_ref::<rustls::Error>().is_some() {
            return true;
        }
        // tokio-rustls wraps rustls's error in an io::Error, whose
        // `source` skips the wrapped error itself.
        at = match e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
        {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => e.source(),
        };
    }
    false
}
