//! HTTPS for `--protocol http1`: rustls (ring provider, TLS 1.2 and 1.3,
//! ALPN `http/1.1`) on both sides, sans-I/O inside the event loops that
//! already drive the plain connections — the loop reads the socket into
//! rustls (`read_tls`, `process_new_packets`), takes plaintext out of it,
//! and writes what rustls has to send (`write_tls`) whenever the socket
//! takes it. Nothing here blocks or owns a socket.
//!
//! The load side ([`ClientTls`]): one `ClientConfig` per process, so the
//! in-memory session cache is shared by every connection and a reconnect
//! resumes; the server's certificate is checked against the system's roots
//! or `--cacert FILE`, or not at all with `--insecure` (signatures are
//! still verified: only the chain and name are not). What a run's
//! handshakes did ([`TlsOut`]): full and resumed, failures with the first
//! reason, the negotiated version, cipher suite and ALPN, and the
//! handshake latency from the intended start.
//!
//! The server side ([`server_config`]): a certificate generated at start
//! (rcgen, self-signed for `localhost`, `127.0.0.1` and the listen address)
//! or read from PEM files; a session cache for resumption.
//!
//! Invariants: bytes from a peer reach only rustls; every TLS failure is a
//! counted, named error, never a panic.

use std::io;
use std::os::fd::RawFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use commbench_core::stats::{LatencyHistogram, Summary};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use crate::net;

/// The one application protocol offered and accepted.
pub const ALPN_HTTP11: &[u8] = b"http/1.1";

/// Sessions the server remembers for resumption.
const SERVER_SESSIONS: usize = 65_536;
/// Sessions the load side remembers (rustls keys them by server name and
/// keeps a few TLS 1.3 tickets per server).
const CLIENT_SESSIONS: usize = 1024;

/// Which TLS versions may be negotiated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsVersion {
    V12,
    V13,
    /// 1.3 or 1.2, whichever the peer prefers.
    #[default]
    Any,
}

impl TlsVersion {
    pub fn as_str(self) -> &'static str {
        match self {
            TlsVersion::V12 => "1.2",
            TlsVersion::V13 => "1.3",
            TlsVersion::Any => "any",
        }
    }
    fn versions(self) -> &'static [&'static rustls::SupportedProtocolVersion] {
        static V12: [&rustls::SupportedProtocolVersion; 1] = [&rustls::version::TLS12];
        static V13: [&rustls::SupportedProtocolVersion; 1] = [&rustls::version::TLS13];
        static ANY: [&rustls::SupportedProtocolVersion; 2] =
            [&rustls::version::TLS13, &rustls::version::TLS12];
        match self {
            TlsVersion::V12 => &V12,
            TlsVersion::V13 => &V13,
            TlsVersion::Any => &ANY,
        }
    }
}

/// A TLS setting that cannot be used (a file missing or unreadable, a
/// certificate or key that does not parse).
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    #[error("{0}: {1}")]
    File(PathBuf, String),
    #[error("TLS setup: {0}")]
    Rustls(String),
    /// A PEM file that is no regular file or too large (the message
    /// names it).
    #[error("{0}")]
    Input(String),
    #[error("no usable root certificate in the system's store ({0}): give --cacert FILE, or --insecure for a self-signed server")]
    NoRoots(String),
    #[error("--sni {0:?} is not a DNS name or IP address")]
    Sni(String),
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The load side's TLS settings, as given.
#[derive(Debug, Clone, Default)]
pub struct ClientTlsSpec {
    pub version: TlsVersion,
    /// Server name sent and checked (None: the target's host).
    pub sni: Option<String>,
    /// Accept any certificate (signatures are still checked).
    pub insecure: bool,
    /// Trust the certificates in this PEM file instead of the system's.
    pub cacert: Option<PathBuf>,
}

/// What every connection of a load process shares: one config (and so one
/// session cache) and the server name.
#[derive(Debug, Clone)]
pub struct ClientTls {
    pub config: Arc<rustls::ClientConfig>,
    pub name: ServerName<'static>,
    pub spec: ClientTlsSpec,
}

impl ClientTls {
    /// Builds the shared config; `host` is the target's host (the SNI
    /// unless `--sni` names another).
    pub fn new(spec: &ClientTlsSpec, host: &str) -> Result<ClientTls, TlsSetupError> {
        let sni = spec.sni.clone().unwrap_or_else(|| host.to_owned());
        let name = ServerName::try_from(sni.clone()).map_err(|_| TlsSetupError::Sni(sni))?;
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(spec.version.versions())
            .map_err(|e| TlsSetupError::Rustls(e.to_string()))?;
        let mut config = if spec.insecure {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider())))
                .with_no_client_auth()
        } else {
            let mut roots = rustls::RootCertStore::empty();
            let mut pinned = Vec::new();
            match &spec.cacert {
                Some(p) => {
                    for c in read_certs(p)? {
                        roots.add(c.clone()).map_err(|e| {
                            TlsSetupError::File(p.clone(), format!("not a CA certificate: {e}"))
                        })?;
                        pinned.push(c);
                    }
                }
                None => {
                    let found = rustls_native_certs::load_native_certs();
                    let (added, _) = roots.add_parsable_certificates(found.certs);
                    if added == 0 {
                        return Err(TlsSetupError::NoRoots(
                            found
                                .errors
                                .first()
                                .map(|e| e.to_string())
                                .unwrap_or_else(|| "empty".into()),
                        ));
                    }
                }
            }
            let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(
                Arc::new(roots),
                provider(),
            )
            .build()
            .map_err(|e| TlsSetupError::Rustls(e.to_string()))?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(CaFileVerifier {
                    webpki,
                    pinned,
                    noted: std::sync::atomic::AtomicBool::new(false),
                }))
                .with_no_client_auth()
        };
        config.alpn_protocols = vec![ALPN_HTTP11.to_vec()];
        config.resumption = rustls::client::Resumption::in_memory_sessions(CLIENT_SESSIONS);
        Ok(ClientTls {
            config: Arc::new(config),
            name,
            spec: spec.clone(),
        })
    }

    /// A new client session (its ClientHello is ready to be written).
    pub fn connect(&self) -> Result<rustls::ClientConnection, rustls::Error> {
        rustls::ClientConnection::new(self.config.clone(), self.name.clone())
    }
}

/// A PEM file the user named: a regular file of at most a few MiB,
/// opened without waiting on a FIFO (`/dev/zero` was a 2 GiB
/// allocation, a FIFO a hang).
fn read_pem(p: &Path) -> Result<Vec<u8>, TlsSetupError> {
    commbench_core::userfile::read_pem(p).map_err(|e| TlsSetupError::Input(e.to_string()))
}

/// Certificates of a PEM file (at least one).
fn read_certs(p: &Path) -> Result<Vec<CertificateDer<'static>>, TlsSetupError> {
    let bad = |e: String| TlsSetupError::File(p.to_owned(), e);
    let pem = read_pem(p)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(e.to_string()))?;
    if certs.is_empty() {
        return Err(bad("no PEM certificate in it".into()));
    }
    Ok(certs)
}

/// The usual verification (chain to a root, the name, dates), plus what
/// curl accepts and webpki does not: the server presenting, as its own
/// certificate, exactly one of the `--cacert` file's certificates when
/// that certificate says CA:TRUE — what `openssl req -x509` makes by
/// default. webpki refuses it (CaUsedAsEndEntity: a CA certificate may
/// only sign others) after it has checked the dates; here the name is
/// checked too, and the run says once on stderr what it accepted and how
/// to make a certificate any client takes.
#[derive(Debug)]
struct CaFileVerifier {
    webpki: Arc<rustls::client::WebPkiServerVerifier>,
    /// The `--cacert` file's certificates (empty: the system's roots).
    pinned: Vec<CertificateDer<'static>>,
    noted: std::sync::atomic::AtomicBool,
}

/// How to make a self-signed certificate that every client accepts: a
/// leaf (CA:FALSE) that names the host in subjectAltName.
pub const MAKE_A_CERTIFICATE: &str = "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 -keyout key.pem -out cert.pem -subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -addext basicConstraints=critical,CA:FALSE (or let `mux serve --tls --cert-out cert.pem` make one)";

impl ServerCertVerifier for CaFileVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let err =
            match self
                .webpki
                .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
            {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
        let ca_as_leaf = matches!(
            &err,
            rustls::Error::InvalidCertificate(rustls::CertificateError::Other(o))
                if o.to_string().contains("CaUsedAsEndEntity")
        );
        if !ca_as_leaf
            || !self
                .pinned
                .iter()
                .any(|p| p.as_ref() == end_entity.as_ref())
        {
            return Err(err);
        }
        let parsed = rustls::server::ParsedCertificate::try_from(end_entity)?;
        rustls::client::verify_server_name(&parsed, server_name)?;
        if !self.noted.swap(true, std::sync::atomic::Ordering::Relaxed) {
            eprintln!(
                "mux: note: the server's certificate is a CA certificate (basicConstraints CA:TRUE, what `openssl req -x509` makes by default) used as its own; accepted, as curl does, because it is byte for byte the one in --cacert and names {}. Strict clients refuse it; one they all take: {MAKE_A_CERTIFICATE}",
                server_name.to_str()
            );
        }
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

#[cfg(test)]
mod ca_as_leaf_tests {
    use super::*;

    /// A self-signed certificate as `openssl req -x509` makes it:
    /// basicConstraints CA:TRUE, the names in subjectAltName (`names`
    /// empty: none). Returns (cert PEM, key PEM).
    fn openssl_like(names: &[&str]) -> (String, String) {
        let mut p =
            rcgen::CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .unwrap();
        p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = p.self_signed(&key).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// Handshakes in memory: the server with `cert`/`key`, the load side
    /// trusting `cacert` and asking for `sni`. The client's error, if any.
    fn handshake(cert: &str, key: &str, cacert: &str, sni: &str) -> Result<(), String> {
        let dir = std::env::temp_dir().join(format!(
            "cb-tls-ca-{}-{}",
            std::process::id(),
            std::thread::current()
                .name()
                .unwrap_or("t")
                .replace(':', "_")
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, cacert).unwrap();
        let client = ClientTls::new(
            &ClientTlsSpec {
                sni: Some(sni.into()),
                cacert: Some(ca),
                ..Default::default()
            },
            "localhost",
        )
        .map_err(|e| e.to_string())?;
        let _ = std::fs::remove_dir_all(&dir);
        let certs = CertificateDer::pem_slice_iter(cert.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
        let sc = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap();
        let mut s = rustls::ServerConnection::new(Arc::new(sc)).unwrap();
        let mut c = client.connect().unwrap();
        // A bounded number of flights: a handshake takes two or three.
        for _ in 0..10 {
            let mut buf = Vec::new();
            while c.wants_write() {
                c.write_tls(&mut buf).unwrap();
            }
            let mut rd = &buf[..];
            while !rd.is_empty() {
                s.read_tls(&mut rd).unwrap();
            }
            s.process_new_packets()
                .map_err(|e| format!("server: {e}"))?;
            let mut buf = Vec::new();
            while s.wants_write() {
                s.write_tls(&mut buf).unwrap();
            }
            let mut rd = &buf[..];
            while !rd.is_empty() {
                c.read_tls(&mut rd).unwrap();
            }
            c.process_new_packets().map_err(|e| e.to_string())?;
            if !c.is_handshaking() && !s.is_handshaking() {
                return Ok(());
            }
        }
        Err("no handshake in ten flights".into())
    }

    /// `openssl req -x509 …` (CA:TRUE by default), then `mux load --tls
    /// --cacert cert.pem`: "invalid peer certificate: … CaUsedAsEndEntity
    /// … give --cacert FILE … or --insecure". curl accepts the same file;
    /// so does the load side now, checking the name as before.
    #[test]
    fn the_usual_self_signed_ca_true_certificate_was_refused_with_advice_to_do_what_was_done() {
        let (cert, key) = openssl_like(&["localhost"]);
        handshake(&cert, &key, &cert, "localhost").unwrap();
        // Trusting another certificate: still refused, and the hint no
        // longer says to give what was given.
        let (other, _) = openssl_like(&["localhost"]);
        let e = handshake(&cert, &key, &other, "localhost").unwrap_err();
        assert!(!hint(&e).is_empty(), "{e}");
        // A leaf made as the note says is accepted through the usual path.
        let leaf = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let (lc, lk) = (leaf.cert.pem(), leaf.key_pair.serialize_pem());
        handshake(&lc, &lk, &lc, "localhost").unwrap();
        assert!(MAKE_A_CERTIFICATE.contains("CA:FALSE"));
        assert!(MAKE_A_CERTIFICATE.contains("subjectAltName"));
    }

    /// A wrong `--sni` got the same "give --cacert … or --insecure" hint.
    #[test]
    fn a_wrong_sni_was_told_to_give_cacert_instead_of_the_name() {
        for (cert, key) in [openssl_like(&["localhost"]), {
            let l = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
            (l.cert.pem(), l.key_pair.serialize_pem())
        }] {
            let e = handshake(&cert, &key, &cert, "other.example").unwrap_err();
            assert!(e.contains("not valid for name"), "{e}");
            let h = hint(&e);
            assert!(h.contains("--sni"), "{h}");
            assert!(
                !h.contains("--insecure") && !h.contains("give --cacert"),
                "{h}"
            );
        }
        // No name in subjectAltName at all: says so, and how to add one.
        let (cert, key) = openssl_like(&[]);
        let e = handshake(&cert, &key, &cert, "localhost").unwrap_err();
        let h = hint(&e);
        assert!(h.contains("subjectAltName"), "{e}{h}");
    }
}

/// `--insecure`: any chain and name are accepted; the handshake's
/// signatures are still verified with the certificate's key.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Where the server's certificate comes from.
#[derive(Debug, Clone, Default)]
pub struct ServerTlsSpec {
    pub version: TlsVersion,
    /// PEM certificate chain and key (None: generate one at start).
    pub cert_key: Option<(PathBuf, PathBuf)>,
    /// Write the (generated or given) certificate here, PEM, for the load
    /// side's `--cacert`.
    pub cert_out: Option<PathBuf>,
}

/// The server's TLS setup and how to trust it.
#[derive(Clone)]
pub struct ServerTls {
    pub config: Arc<rustls::ServerConfig>,
    /// SHA-256 of the leaf certificate (DER), hex with colons.
    pub fingerprint: String,
    /// Whether the certificate was generated at start.
    pub generated: bool,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("fingerprint", &self.fingerprint)
            .field("generated", &self.generated)
            .finish()
    }
}

/// What ssh says of a private key others can read (`Permissions 0644
/// for 'key' are too open`): a warning naming the mode and the fix, or
/// None for a key only its owner can read.
pub fn key_too_open(key: &Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(key).ok()?.permissions().mode() & 0o7777;
    (mode & 0o077 != 0).then(|| {
        format!(
            "--key {} is open to other users (mode {mode:04o}): anyone on this host may read \
             the private key (ssh refuses such a key); chmod 600 {}",
            key.display(),
            key.display()
        )
    })
}

/// Builds the server's TLS config: the given certificate and key, or a
/// self-signed one for `localhost`, `127.0.0.1` and `listen_ip`.
pub fn server_config(spec: &ServerTlsSpec, listen_ip: &str) -> Result<ServerTls, TlsSetupError> {
    let (chain, key, pem, generated) = match &spec.cert_key {
        Some((cert, key)) => {
            let chain = read_certs(cert)?;
            let key_pem = read_pem(key)?;
            if let Some(w) = key_too_open(key) {
                eprintln!("commbench mux: warning: {w}");
            }
            let key = PrivateKeyDer::from_pem_slice(&key_pem)
                .map_err(|e| TlsSetupError::File(key.clone(), format!("no usable key: {e}")))?;
            let pem = String::from_utf8(read_pem(cert)?)
                .map_err(|e| TlsSetupError::File(cert.clone(), e.to_string()))?;
            (chain, key, pem, false)
        }
        None => {
            let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
            if !names.iter().any(|n| n == listen_ip) && listen_ip != "0.0.0.0" {
                names.push(listen_ip.to_owned());
            }
            let ck = rcgen::generate_simple_self_signed(names)
                .map_err(|e| TlsSetupError::Rustls(format!("generating a certificate: {e}")))?;
            let key = PrivateKeyDer::try_from(ck.key_pair.serialize_der())
                .map_err(|e| TlsSetupError::Rustls(e.to_string()))?;
            (vec![ck.cert.der().clone()], key, ck.cert.pem(), true)
        }
    };
    let fingerprint = fingerprint(&chain[0]);
    if let Some(out) = &spec.cert_out {
        // Through the checked writer, as every output: never through
        // another user's link, never blocked on a FIFO.
        commbench_core::artifact::write_atomic(out, |f| {
            std::io::Write::write_all(f, pem.as_bytes())
        })
        .map_err(|e| TlsSetupError::File(out.clone(), e.to_string()))?;
    }
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(spec.version.versions())
        .map_err(|e| TlsSetupError::Rustls(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| TlsSetupError::Rustls(format!("certificate and key: {e}")))?;
    config.alpn_protocols = vec![ALPN_HTTP11.to_vec()];
    config.session_storage = rustls::server::ServerSessionMemoryCache::new(SERVER_SESSIONS);
    Ok(ServerTls {
        config: Arc::new(config),
        fingerprint,
        generated,
    })
}

/// A self-signed certificate and its key, both PEM, for `names` (DNS
/// names or IP addresses): what `mux serve --tls` makes at start, for a
/// server of another kind (nginx in the tests and benchmarks).
pub fn generate_pem(names: Vec<String>) -> Result<(String, String), TlsSetupError> {
    let ck = rcgen::generate_simple_self_signed(names)
        .map_err(|e| TlsSetupError::Rustls(format!("generating a certificate: {e}")))?;
    Ok((ck.cert.pem(), ck.key_pair.serialize_pem()))
}

/// SHA-256 of a certificate, hex bytes joined by colons (as `openssl x509
/// -fingerprint -sha256` prints it).
pub fn fingerprint(der: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, der)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// A socket as rustls's reader and writer (non-blocking: WouldBlock comes
/// back as such).
pub struct FdIo(pub RawFd);

impl io::Read for FdIo {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        net::read(self.0, buf)
    }
}

impl io::Write for FdIo {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        net::write(self.0, buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// What a load run's TLS handshakes did.
#[derive(Debug, Clone, Default)]
pub struct TlsOut {
    /// Handshakes completed without resumption (every one of the run,
    /// warm-up included).
    pub full: u64,
    /// Handshakes that resumed a session.
    pub resumed: u64,
    /// Handshakes that failed (bad certificate, no common version or
    /// cipher, wrong ALPN, alert, reset mid-handshake).
    pub failed: u64,
    /// The first failure's reason.
    pub first_error: Option<String>,
    /// Negotiated on the first completed handshake.
    pub version: Option<String>,
    pub cipher: Option<String>,
    pub alpn: Option<String>,
    /// Handshake latency from the intended send time of the first request
    /// the connection carries to the handshake's end, for handshakes
    /// started for requests of the measured window.
    pub handshake: LatencyHistogram,
}

impl TlsOut {
    pub fn merge(&mut self, o: &TlsOut) {
        self.full += o.full;
        self.resumed += o.resumed;
        self.failed += o.failed;
        if self.first_error.is_none() {
            self.first_error.clone_from(&o.first_error);
        }
        if self.version.is_none() {
            self.version.clone_from(&o.version);
            self.cipher.clone_from(&o.cipher);
            self.alpn.clone_from(&o.alpn);
        }
        self.handshake.merge(&o.handshake);
    }

    /// Counts a completed handshake and notes what it negotiated.
    pub fn completed(&mut self, c: &rustls::ClientConnection) {
        match c.handshake_kind() {
            Some(rustls::HandshakeKind::Resumed) => self.resumed += 1,
            _ => self.full += 1,
        }
        if self.version.is_none() {
            self.version = c.protocol_version().map(version_name);
            self.cipher = c
                .negotiated_cipher_suite()
                .map(|s| format!("{:?}", s.suite()));
            self.alpn = Some(match c.alpn_protocol() {
                Some(p) => String::from_utf8_lossy(p).into_owned(),
                None => "none".into(),
            });
        }
    }

    /// Counts a failed handshake.
    pub fn failure(&mut self, why: &str) {
        self.failed += 1;
        if self.first_error.is_none() {
            self.first_error = Some(why.to_owned());
        }
    }

    /// Why nothing was measured: every handshake failed (None: at least
    /// one completed, or none was tried).
    pub fn none_completed(&self) -> Option<String> {
        if self.full + self.resumed > 0 || self.failed == 0 {
            return None;
        }
        let why = self.first_error.as_deref().unwrap_or("unknown");
        Some(format!(
            "not measured, because every TLS handshake failed ({} of {}; first: {why}){}",
            self.failed,
            self.failed,
            hint(why)
        ))
    }

    pub fn result(&self) -> TlsResult {
        TlsResult {
            handshakes: self.full + self.resumed,
            full: self.full,
            resumed: self.resumed,
            failed: self.failed,
            first_error: self.first_error.clone(),
            version: self.version.clone(),
            cipher: self.cipher.clone(),
            alpn: self.alpn.clone(),
            handshake_ns: self.handshake.summary(),
        }
    }
}

/// What to do about a handshake failure, from its reason. The name
/// first: a wrong `--sni` once got the advice to give `--cacert`, which
/// had been given.
fn hint(why: &str) -> &'static str {
    if why.contains("not valid for name") || why.contains("NotValidForName") {
        if why.contains("not valid for any names") {
            ": the certificate names no host in subjectAltName (a CN alone is not checked) — make one that does: openssl req -x509 … -addext subjectAltName=DNS:localhost,IP:127.0.0.1, or let `mux serve --tls --cert-out FILE` make one"
        } else {
            ": the certificate does not name the host the load side asked for — give --sni with a name it holds (listed above), or connect by that name"
        }
    } else if why.contains("CaUsedAsEndEntity") {
        ": the server's certificate is a CA certificate (CA:TRUE) that is not the one in --cacert; a server needs a leaf certificate (CA:FALSE) — make one with: openssl req -x509 … -addext basicConstraints=critical,CA:FALSE -addext subjectAltName=DNS:localhost"
    } else if why.contains("certificate") || why.contains("UnknownIssuer") {
        ": the server's certificate is not trusted here — give --cacert FILE (the certificate `mux serve --tls --cert-out FILE` wrote), or --insecure for a self-signed server"
    } else if why.contains("version") || why.contains("ProtocolVersion") {
        ": no TLS version both sides allow — check --tls-version"
    } else if why.contains("ALPN") || why.contains("application protocol") {
        ": the server does not speak http/1.1 over TLS (ALPN)"
    } else {
        ""
    }
}

/// A rustls version as written in records (`TLSv1.3`).
fn version_name(v: rustls::ProtocolVersion) -> String {
    match v {
        rustls::ProtocolVersion::TLSv1_3 => "TLSv1.3".into(),
        rustls::ProtocolVersion::TLSv1_2 => "TLSv1.2".into(),
        other => format!("{other:?}"),
    }
}

/// A run's TLS figures as records carry them.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TlsResult {
    pub handshakes: u64,
    pub full: u64,
    pub resumed: u64,
    pub failed: u64,
    pub first_error: Option<String>,
    pub version: Option<String>,
    pub cipher: Option<String>,
    pub alpn: Option<String>,
    /// Handshake latency from the intended start (see [`TlsOut::handshake`]).
    pub handshake_ns: Summary,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_certificate_is_trusted_through_cacert_and_names_localhost() {
        let dir = std::env::temp_dir().join(format!("cb-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("cert.pem");
        let s = server_config(
            &ServerTlsSpec {
                cert_out: Some(out.clone()),
                ..Default::default()
            },
            "127.0.0.1",
        )
        .unwrap();
        assert!(s.generated);
        assert_eq!(s.fingerprint.len(), 32 * 3 - 1);
        let spec = ClientTlsSpec {
            cacert: Some(out),
            ..Default::default()
        };
        assert!(ClientTls::new(&spec, "localhost").is_ok());
        let e = ClientTls::new(
            &ClientTlsSpec {
                cacert: Some(dir.join("missing.pem")),
                ..Default::default()
            },
            "localhost",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("missing.pem"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Issue 50, item 1: `mux serve --tls --cert-out shared/cert.pem`
    /// overwrote the root-only file another user's link there led to,
    /// and a FIFO there blocked the server before it listened.
    #[test]
    fn cert_out_wrote_through_another_users_symlink() {
        use std::os::unix::fs::PermissionsExt;
        let dir = commbench_core::artifact::TempDir::new("tls").unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, b"root only").unwrap();
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
        let shared = dir.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let out = shared.join("cert.pem");
        std::os::unix::fs::symlink(&secret, &out).unwrap();
        let spec = |out: &Path| ServerTlsSpec {
            cert_out: Some(out.to_owned()),
            ..Default::default()
        };
        if let Err(e) = std::os::unix::fs::lchown(&out, Some(65534), Some(65534)) {
            commbench_core::testing::skip_part(
                "another user's link",
                "root",
                format!("cannot give the link away ({e})"),
            );
        } else {
            // Another user's link to a regular file: replaced, not followed.
            server_config(&spec(&out), "127.0.0.1").unwrap();
            assert_eq!(std::fs::read(&secret).unwrap(), b"root only");
            assert!(std::fs::read_to_string(&out)
                .unwrap()
                .contains("BEGIN CERTIFICATE"));
            // Another user's link in the way to a folder: refused.
            let private = dir.path().join("private");
            std::fs::create_dir(&private).unwrap();
            let via = shared.join("certs");
            std::os::unix::fs::symlink(&private, &via).unwrap();
            std::os::unix::fs::lchown(&via, Some(65534), Some(65534)).unwrap();
            let e = server_config(&spec(&via.join("cert.pem")), "127.0.0.1")
                .unwrap_err()
                .to_string();
            assert!(e.contains("user 65534"), "{e}");
            assert!(!private.join("cert.pem").exists());
        }
        // A FIFO with no reader: an error at once, not a server that
        // never listens.
        let fifo = dir.path().join("fifo.pem");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let e = server_config(&spec(&fifo), "127.0.0.1")
            .unwrap_err()
            .to_string();
        assert!(e.contains("nothing reads from this FIFO"), "{e}");
    }

    /// Issue 50, item 4: `--key /dev/zero` aborted allocating 2 GiB, a
    /// FIFO hung; a key others can read was taken silently.
    #[test]
    fn pem_files_that_are_devices_or_fifos_are_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = commbench_core::artifact::TempDir::new("tls").unwrap();
        let fifo = dir.path().join("key.pem");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        for (cert, key) in [("/dev/zero", "/dev/zero"), ("/dev/urandom", "/dev/urandom")] {
            let spec = ServerTlsSpec {
                cert_key: Some((cert.into(), key.into())),
                ..Default::default()
            };
            let e = server_config(&spec, "127.0.0.1").unwrap_err().to_string();
            assert!(e.contains("a character device, not a regular file"), "{e}");
        }
        let e = ClientTls::new(
            &ClientTlsSpec {
                cacert: Some(fifo.clone()),
                ..Default::default()
            },
            "localhost",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("a FIFO, not a regular file"), "{e}");
        let key = dir.path().join("open.pem");
        std::fs::write(&key, b"k").unwrap();
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
        let w = key_too_open(&key).unwrap();
        assert!(w.contains("mode 0644") && w.contains("chmod 600"), "{w}");
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(key_too_open(&key), None);
    }

    #[test]
    fn every_handshake_failing_says_not_measured_and_what_to_do() {
        let mut t = TlsOut::default();
        assert_eq!(t.none_completed(), None);
        t.failure("invalid peer certificate: UnknownIssuer");
        t.failure("invalid peer certificate: UnknownIssuer");
        let why = t.none_completed().unwrap();
        assert!(why.starts_with("not measured, because every TLS handshake failed (2 of 2"));
        assert!(why.contains("--insecure"), "{why}");
        t.resumed = 1;
        assert_eq!(t.none_completed(), None);
    }
}
