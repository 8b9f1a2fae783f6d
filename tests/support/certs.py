"""Certificates for the TLS tests, made in the test's temp dir: a CA, a server certificate (for
127.0.0.1 and localhost) and a client certificate, both signed by the CA; keys in PKCS#8 PEM (what
Netty's `SslContextBuilder.keyManager` reads, so the Java client takes them too)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Certs:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    stranger_cert: Path  # a client certificate from another CA
    stranger_key: Path


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _write_key(key: ec.EllipticCurvePrivateKey, path: Path) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )


def _cert(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool = False,
    usage: x509.ObjectIdentifier | None = None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )  # fmt: skip
    else:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(cert: x509.Certificate, path: Path) -> Path:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def make_certs(folder: Path) -> Certs:
    folder.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("rocketlite test CA", ca_key, _name("rocketlite test CA"), ca_key, ca=True)
    other_key = ec.generate_private_key(ec.SECP256R1())
    other_ca = _cert("another CA", other_key, _name("another CA"), other_key, ca=True)
    out: dict[str, Path] = {"ca": _pem(ca, folder / "ca.pem")}
    for name, issuer, issuer_key, usage in (
        ("server", ca, ca_key, ExtendedKeyUsageOID.SERVER_AUTH),
        ("client", ca, ca_key, ExtendedKeyUsageOID.CLIENT_AUTH),
        ("stranger", other_ca, other_key, ExtendedKeyUsageOID.CLIENT_AUTH),
    ):
        key = ec.generate_private_key(ec.SECP256R1())
        _write_key(key, folder / f"{name}.key")
        _pem(_cert(name, key, issuer.subject, issuer_key, usage=usage), folder / f"{name}.pem")
        out[f"{name}_cert"] = folder / f"{name}.pem"
        out[f"{name}_key"] = folder / f"{name}.key"
    return Certs(**out)
