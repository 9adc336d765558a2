//! `mux load --tls` and `mux serve --tls`: HTTPS options, parsed into the
//! lab's TLS settings (`commbench_mux::tls`), and `--conn-per-request`.
use anyhow::Result;
use clap::{Args, ValueEnum};
use commbench_mux::tls::{ClientTls, ClientTlsSpec, ServerTls, ServerTlsSpec, TlsVersion};
use commbench_mux::{MuxConfig, Protocol};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum TlsVersionArg {
    /// TLS 1.2 only.
    #[value(name = "1.2")]
    V12,
    /// TLS 1.3 only.
    #[value(name = "1.3")]
    V13,
    /// 1.3 or 1.2, as the peer prefers.
    Any,
}

impl TlsVersionArg {
    fn kind(self) -> TlsVersion {
        match self {
            TlsVersionArg::V12 => TlsVersion::V12,
            TlsVersionArg::V13 => TlsVersion::V13,
            TlsVersionArg::Any => TlsVersion::Any,
        }
    }
}

#[derive(Debug, Args)]
pub struct TlsLoadArgs {
    /// HTTPS (--protocol http1): rustls, ALPN http/1.1, the server's certificate checked against
    /// the system's roots (or --cacert); handshakes counted (full, resumed, failed) with their
    /// latency from the intended start, sessions resumed on reconnect.
    #[arg(long, help_heading = "HTTPS")]
    pub tls: bool,
    /// TLS versions offered.
    #[arg(long, value_enum, default_value = "any", help_heading = "HTTPS")]
    pub tls_version: TlsVersionArg,
    /// Server name sent (SNI) and checked in the certificate (default: --host).
    #[arg(long, value_name = "NAME", requires = "tls", help_heading = "HTTPS")]
    pub sni: Option<String>,
    /// Accept any certificate (a self-signed server); the handshake's signatures are still checked.
    #[arg(
        long,
        requires = "tls",
        conflicts_with = "cacert",
        help_heading = "HTTPS"
    )]
    pub insecure: bool,
    /// Trust the CA certificates in this PEM file instead of the system's roots (e.g. the
    /// certificate `mux serve --tls --cert-out FILE` wrote).
    #[arg(long, value_name = "FILE", requires = "tls", help_heading = "HTTPS")]
    pub cacert: Option<PathBuf>,
    /// Ask the server to close after every response (`Connection: close`): a new connection per
    /// request, and with --tls a new handshake (resumed when the session cache allows).
    #[arg(long, help_heading = "HTTP/1.1")]
    pub conn_per_request: bool,
}

/// Puts the HTTPS settings and --conn-per-request into the run's config.
pub fn apply_load(a: &TlsLoadArgs, cfg: &mut MuxConfig) -> Result<()> {
    if (a.tls || a.conn_per_request) && cfg.protocol != Protocol::Http1 {
        return Err(crate::usage(
            "--tls and --conn-per-request need --protocol http1",
        ));
    }
    if a.tls && cfg.warmup_rounds > 0 {
        return Err(crate::usage(
            "--tls runs warm-up inside the run: give --warmup SECONDS (with --rate), not --warmup-rounds",
        ));
    }
    cfg.http.close = a.conn_per_request;
    if a.tls {
        let spec = ClientTlsSpec {
            version: a.tls_version.kind(),
            sni: a.sni.clone(),
            insecure: a.insecure,
            cacert: a.cacert.clone(),
        };
        let c = ClientTls::new(&spec, &cfg.http.host).map_err(crate::usage_err)?;
        cfg.tls = Some(Arc::new(c));
    }
    Ok(())
}

#[derive(Debug, Args)]
pub struct TlsServeArgs {
    /// HTTPS (--protocol http1; every engine): TLS on every connection, with
    /// a certificate generated at start (self-signed for localhost, 127.0.0.1 and the listen
    /// address; its SHA-256 fingerprint printed) or the one of --cert and --key.
    #[arg(long, help_heading = "HTTPS")]
    pub tls: bool,
    /// TLS versions accepted.
    #[arg(long, value_enum, default_value = "any", help_heading = "HTTPS")]
    pub tls_version: TlsVersionArg,
    /// PEM certificate chain to serve (with --key) instead of a generated one.
    #[arg(long, value_name = "FILE", requires_all = ["tls", "key"], help_heading = "HTTPS")]
    pub cert: Option<PathBuf>,
    /// PEM private key of --cert.
    #[arg(long, value_name = "FILE", requires = "cert", help_heading = "HTTPS")]
    pub key: Option<PathBuf>,
    /// Write the served certificate (PEM) here, for `mux load --tls --cacert FILE`.
    #[arg(long, value_name = "FILE", requires = "tls", help_heading = "HTTPS")]
    pub cert_out: Option<PathBuf>,
}

/// The server's TLS setup (None without --tls); says on stderr how to
/// trust it.
pub fn server(a: &TlsServeArgs, listen: SocketAddr) -> Result<Option<ServerTls>> {
    if !a.tls {
        return Ok(None);
    }
    let spec = ServerTlsSpec {
        version: a.tls_version.kind(),
        cert_key: a.cert.clone().zip(a.key.clone()),
        cert_out: a.cert_out.clone(),
    };
    let t = commbench_mux::tls::server_config(&spec, &listen.ip().to_string())
        .map_err(crate::usage_err)?;
    eprintln!(
        "commbench mux serve: TLS with {} certificate, SHA-256 fingerprint {}{}",
        if t.generated {
            "a generated (self-signed)"
        } else {
            "the given"
        },
        t.fingerprint,
        match &a.cert_out {
            Some(p) => format!(
                "; written to {} (mux load --tls --cacert {})",
                p.display(),
                p.display()
            ),
            None if t.generated =>
                "; mux load needs --insecure, or --cert-out FILE and --cacert FILE".into(),
            None => String::new(),
        }
    );
    Ok(Some(t))
}
