"""`--tls`: a local CA and a server certificate for https/wss.

The CA is kept in the TLS directory and reused across restarts (so clients that trust
it keep working); the server certificate is re-issued at every start for the names and
addresses being served. Clients trust the CA via `SSL_CERT_FILE=<ca.pem>` or, in kit
containers, `PROXY_CA_CERT_B64` (the base64 of the same file).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from bandkit.emulator.errors import EmulatorError, Phase

CA_NAME = "Band emulator local CA"


@dataclass(frozen=True)
class TlsFiles:
    ca_cert: Path
    cert: Path
    key: Path


def _write(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(path, mode)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _load_or_make_ca(
    directory: Path, now: dt.datetime
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert_path, key_path = directory / "ca.pem", directory / "ca-key.pem"
    if cert_path.exists() and key_path.exists():
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        if isinstance(key, ec.EllipticCurvePrivateKey) and cert.not_valid_after_utc > now:
            return cert, key
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, CA_NAME)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    _write(key_path, _pem_key(key), 0o600)
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return cert, key


def make_ca_pem(directory: Path) -> bytes:
    """A local CA certificate (PEM), made in `directory` (or reused from there)."""
    cert, _ = _load_or_make_ca(directory, dt.datetime.now(dt.UTC))
    return cert.public_bytes(serialization.Encoding.PEM)


def _alt_names(hosts: list[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in dict.fromkeys([*hosts, "localhost", "127.0.0.1", "::1"]):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def ensure(directory: Path, hosts: list[str]) -> TlsFiles:
    """Create (or reuse) the CA in `directory` and issue a server cert for `hosts`."""
    try:
        # Readable directory (the CA certificate is public, e.g. for a uid-1000 agent's
        # SSL_CERT_FILE); both private keys are written 0600.
        directory.mkdir(parents=True, exist_ok=True)
        os.chmod(directory, 0o755)  # noqa: S103 - deliberate, see above
        now = dt.datetime.now(dt.UTC)
        ca_cert, ca_key = _load_or_make_ca(directory, now)
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName(_alt_names(hosts)), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                critical=False,
            )
            .sign(ca_key, hashes.SHA256())
        )
        files = TlsFiles(
            directory / "ca.pem", directory / "server.pem", directory / "server-key.pem"
        )
        _write(files.key, _pem_key(key), 0o600)
        _write(files.cert, cert.public_bytes(serialization.Encoding.PEM), 0o644)
        return files
    except OSError as exc:
        raise EmulatorError(
            Phase.TLS, f"cannot write TLS files in {directory}: {exc.strerror}; pick --tls-dir"
        ) from None
