//! `ssl.cipher.suites` in Java's (IANA's) names, matched to the suites rustls implements.
//!
//! rustls implements the AEAD suites only (AES-GCM and ChaCha20-Poly1305, with ECDHE for
//! TLS 1.2); a name it does not implement (CBC modes, RSA key exchange, ...) is refused with
//! the list of names that would work, rather than dropped: a team that pinned its suites
//! must learn that this broker would negotiate others.

use rustls::crypto::ring::ALL_CIPHER_SUITES;
use rustls::SupportedCipherSuite;

use super::settings::TlsVersion;

/// The IANA name of a suite as Java writes it: rustls calls the TLS 1.3 ones `TLS13_...`.
fn java_name(suite: &SupportedCipherSuite) -> String {
    let name = format!("{:?}", suite.suite());
    match name.strip_prefix("TLS13_") {
        Some(rest) => format!("TLS_{rest}"),
        None => name,
    }
}

fn version_of(suite: &SupportedCipherSuite) -> TlsVersion {
    match suite.version().version {
        rustls::ProtocolVersion::TLSv1_3 => TlsVersion::Tls13,
        _ => TlsVersion::Tls12,
    }
}

/// The suites to offer: `names` in order (empty: every suite rustls implements), only
/// those of an enabled protocol version. Refuses a name rustls does not implement, and a
/// list that leaves an enabled version without any suite.
pub fn resolve(
    names: &[String],
    enabled: &[TlsVersion],
) -> Result<Vec<SupportedCipherSuite>, String> {
    let available: Vec<SupportedCipherSuite> = ALL_CIPHER_SUITES
        .iter()
        .copied()
        .filter(|s| enabled.contains(&version_of(s)))
        .collect();
    if names.is_empty() {
        return Ok(available);
    }
    let mut out = Vec::new();
    for name in names {
        match ALL_CIPHER_SUITES.iter().find(|s| java_name(s) == *name) {
            Some(s) if enabled.contains(&version_of(s)) => out.push(*s),
            Some(_) => {}
            None => {
                let known: Vec<String> = ALL_CIPHER_SUITES.iter().map(java_name).collect();
                return Err(format!(
                    "{name} is not a cipher suite skua's TLS (rustls) implements; it implements {}",
                    known.join(", ")
                ));
            }
        }
    }
    for v in enabled {
        if !out.iter().any(|s| version_of(s) == *v) {
            return Err(format!(
                "none of the suites listed is for {}, which ssl.enabled.protocols enables",
                match v {
                    TlsVersion::Tls12 => "TLSv1.2",
                    TlsVersion::Tls13 => "TLSv1.3",
                }
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_names_select_rustls_suites() {
        let both = [TlsVersion::Tls12, TlsVersion::Tls13];
        let names = vec![
            "TLS_AES_256_GCM_SHA384".to_string(),
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".to_string(),
        ];
        let got = resolve(&names, &both).unwrap();
        let got: Vec<String> = got.iter().map(java_name).collect();
        assert_eq!(got, names);
        assert!(resolve(&[], &[TlsVersion::Tls13])
            .unwrap()
            .iter()
            .all(|s| version_of(s) == TlsVersion::Tls13));
        let err = resolve(&["TLS_RSA_WITH_AES_128_CBC_SHA".into()], &both).unwrap_err();
        assert!(err.contains("TLS_AES_128_GCM_SHA256"), "{err}");
        let err = resolve(&["TLS_AES_128_GCM_SHA256".into()], &both).unwrap_err();
        assert!(err.contains("TLSv1.2"), "{err}");
    }
}
