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
