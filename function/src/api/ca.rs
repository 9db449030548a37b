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

/// Whether the CA certificate `pem` has expired at `now`, or its validity cannot be read: Envoy Gateway refuses a
/// client-validation policy whose CAs have all expired, and then requires a client certificate it does not verify,
/// so an expired CA must never be all a cluster gateway trusts.
pub fn expired(pem: &str, now: std::time::SystemTime) -> bool {
    let Ok(der) = CertificateDer::from_pem_slice(pem.as_bytes()) else {
        return true;
    };
    let now = now
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    not_after(der.as_ref()).is_none_or(|end| end < now)
}

/// One DER element of `input`: its tag, its contents, and what follows it.
fn element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let len = rest[..count]
            .iter()
            .fold(0usize, |n, &b| (n << 8) | usize::from(b));
        (len, &rest[count..])
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

/// The `notAfter` of an X.509 certificate's DER, in seconds since the Unix epoch (RFC 5280 4.1.2.5: UTCTime or
/// GeneralizedTime, `Z`, no fractions).
fn not_after(der: &[u8]) -> Option<u64> {
    let (_, certificate, _) = element(der)?;
    let (_, tbs, _) = element(certificate)?;
    let mut fields = tbs;
    if fields.first() == Some(&0xa0) {
        fields = element(fields)?.2; // the explicit version
    }
    for _ in 0..3 {
        fields = element(fields)?.2; // serial, signature algorithm, issuer
    }
    let (_, validity, _) = element(fields)?;
    let (tag, time, _) = element(element(validity)?.2)?;
    let text = std::str::from_utf8(time).ok()?.strip_suffix('Z')?;
    let (year, rest) = match (tag, text.len()) {
        (0x17, 12) => {
            let yy: u64 = text[..2].parse().ok()?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, &text[2..])
        }
        (0x18, 14) => (text[..4].parse().ok()?, &text[4..]),
        _ => return None,
    };
    let part = |i: usize| rest.get(i..i + 2)?.parse::<u64>().ok();
    let (month, day) = (part(0)?, part(2)?);
    let days = days_from_civil(year, month, day)?;
    Some(days * 86_400 + part(4)? * 3_600 + part(6)? * 60 + part(8)?)
}

/// Days from 1970-01-01 to a date on or after it (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: u64, month: u64, day: u64) -> Option<u64> {
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || year < 1970 {
        return None;
    }
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    (era * 146_097 + doe).checked_sub(719_468)
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

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    const CLUSTER_CA: &str = include_str!("../../../tests/fixtures/tls/cluster-gateway-ca.pem");
    const CLIENT_CA: &str = include_str!("../../../tests/fixtures/tls/fleet-client-ca.pem");
    const EXPIRED_CA: &str = include_str!("../../../tests/fixtures/tls/expired-ca.pem");

    #[test]
    fn not_after_reads_utc_and_generalized_time_as_openssl_does() {
        // `date -d "$(openssl x509 -noout -enddate -in F | cut -d= -f2)" +%s` of each fixture.
        for (pem, end) in [
            (CLUSTER_CA, 2_111_535_235),
            (CLIENT_CA, 4_950_071_422),
            (EXPIRED_CA, 1_609_459_200),
        ] {
            let der = CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
            assert_eq!(not_after(der.as_ref()), Some(end));
        }
    }

    #[test]
    fn a_ca_is_expired_from_the_second_after_its_not_after_and_when_unreadable() {
        let at = |secs| UNIX_EPOCH + Duration::from_secs(secs);
        assert!(!expired(EXPIRED_CA, at(1_609_459_200)));
        assert!(expired(EXPIRED_CA, at(1_609_459_201)));
        assert!(!expired(CLUSTER_CA, at(1_609_459_201)));
        assert!(expired("not a certificate", at(0)));
        assert_eq!(not_after(&[0x30, 0x84, 0xff, 0xff, 0xff, 0xff]), None);
        assert_eq!(not_after(&[]), None);
    }
}
