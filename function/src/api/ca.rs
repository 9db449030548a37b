//! What counts as a CA certificate anywhere Modelplane trusts one: a cluster gateway's published CA (read from
//! observed status) and a ModelEndpoint's `spec.tls.caCertificate` (read from the user). Both are bytes from
//! outside, so they are bounded before they are parsed.

use rustls::{
    RootCertStore,
    pki_types::{CertificateDer, pem::PemObject},
};

/// A CA certificate is well under 4 KiB; anything bigger is not one a cluster gateway issued.
pub const MAX_CA_BYTES: usize = 16 * 1024;

/// Whether `pem` is exactly one PEM certificate a TLS client can trust (bounded before parsing). The error says
/// what is wrong, for a message naming the field it came from.
pub fn valid_ca(pem: &str) -> Result<(), String> {
    if pem.len() > MAX_CA_BYTES {
        return Err(format!(
            "is {} bytes; a CA certificate is at most {MAX_CA_BYTES}",
            pem.len()
        ));
    }
    let certificates: Vec<CertificateDer<'_>> = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<_, _>>()
        .map_err(|e| format!("is not PEM: {e}"))?;
    let [certificate] = &certificates[..] else {
        return Err(format!(
            "holds {} PEM certificates; one CA certificate is expected",
            certificates.len()
        ));
    };
    RootCertStore::empty()
        .add(certificate.clone())
        .map_err(|e| format!("is not a usable CA certificate: {e}"))
}

/// The SHA-256 fingerprint of a valid CA certificate (`sha256:` and lowercase hex of its DER), as clusters report
/// the client CAs they trust: short where a PEM is long, and the same for the same certificate however it is
/// wrapped.
pub fn fingerprint(pem: &str) -> Option<String> {
    valid_ca(pem).ok()?;
    let der = CertificateDer::from_pem_slice(pem.as_bytes()).ok()?;
    let digest = ring::digest::digest(&ring::digest::SHA256, der.as_ref());
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    Some(format!("sha256:{hex}"))
}

const PEM_END: &str = "-----END CERTIFICATE-----";

/// The valid CA certificates of a PEM bundle (several certificates one after the other), each as its own PEM, in
/// order; at most `limit`, and nothing of a bundle longer than `limit` certificates could be.
pub fn split_bundle(bundle: &str, limit: usize) -> Vec<String> {
    if bundle.len() > limit.saturating_mul(MAX_CA_BYTES) {
        return Vec::new();
    }
    bundle
        .split_inclusive(PEM_END)
        .map(str::trim)
        .filter(|pem| valid_ca(pem).is_ok())
        .map(str::to_owned)
        .take(limit)
        .collect()
}
