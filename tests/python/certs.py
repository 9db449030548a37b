"""Certificates shaped like the ones Crossplane issues to functions (internal/initializer/tls.go).

RSA 2048 keys in PKCS#1 PEM (`BEGIN RSA PRIVATE KEY`), a CA with CertSign/CRLSign, a server certificate for
serverAuth and a client certificate for clientAuth, each signed by the CA.
"""

from __future__ import annotations

import dataclasses
import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Crossplane issues ten-year certificates; the tests need them valid only while they run.
VALIDITY = datetime.timedelta(days=1)


@dataclasses.dataclass(frozen=True)
class KeyPair:
    cert_pem: bytes
    key_pem: bytes
    cert: x509.Certificate
    key: rsa.RSAPrivateKey


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pkcs1(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())


def _pair(cert: x509.Certificate, key: rsa.RSAPrivateKey) -> KeyPair:
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _pkcs1(key), cert, key)


def _builder(common_name: str, key: rsa.RSAPrivateKey, issuer: x509.Name) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc)
    return (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Crossplane"),
                                     x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(issuer)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY))


def certificate_authority(common_name: str = "Crossplane Root CA") -> KeyPair:
    key = _key()
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Crossplane"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (_builder(common_name, key, name)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return _pair(cert, key)


def _leaf(ca: KeyPair, common_name: str, usage: x509.ObjectIdentifier,
          sans: list[x509.GeneralName] | None = None) -> KeyPair:
    key = _key()
    builder = (_builder(common_name, key, ca.cert.subject)
               .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
               .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=True,
                                            data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                            crl_sign=False, encipher_only=False, decipher_only=False),
                              critical=True)
               .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()),
                              critical=False))
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return _pair(builder.sign(ca.key, hashes.SHA256()), key)


def server(ca: KeyPair) -> KeyPair:
    """A function server certificate, valid for the loopback names the tests dial."""
    return _leaf(ca, "function-modelplane", ExtendedKeyUsageOID.SERVER_AUTH, [
        x509.DNSName("localhost"),
        x509.DNSName("function-modelplane.crossplane-system.svc"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    ])


def client(ca: KeyPair) -> KeyPair:
    """The certificate Crossplane presents when it calls a function."""
    return _leaf(ca, "crossplane", ExtendedKeyUsageOID.CLIENT_AUTH)


def write_server_dir(directory: Path, ca: KeyPair, server_pair: KeyPair) -> Path:
    """The layout of the Secret Crossplane mounts at TLS_SERVER_CERTS_DIR."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "ca.crt").write_bytes(ca.cert_pem)
    (directory / "tls.crt").write_bytes(server_pair.cert_pem)
    (directory / "tls.key").write_bytes(server_pair.key_pem)
    return directory
