"""Test certificates made with `cryptography`: a CA, a server certificate for 127.0.0.1, a client one."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _cert(subject: str, key, issuer: str, issuer_key, ca: bool, hosts: bool):
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(_name(issuer))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(days=1))
               .not_valid_after(now + datetime.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))  # fmt: skip
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
            encipher_only=False, decipher_only=False), critical=True)  # fmt: skip
        builder = builder.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                                        critical=False)  # fmt: skip
    else:
        builder = builder.add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False)
    if hosts:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(cert) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key, password: str | None = None) -> bytes:
    enc = (serialization.BestAvailableEncryption(password.encode()) if password
           else serialization.NoEncryption())  # fmt: skip
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc)


def make_pki(directory: Path, key_password: str) -> dict[str, Path]:
    """ca.pem, server.pem/server.key (127.0.0.1), client.pem/client.key (encrypted), wrong-ca.pem."""
    directory.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}

    def write(name: str, data: bytes) -> None:
        out[name] = directory / name
        out[name].write_bytes(data)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("fluxmat test CA", ca_key, "fluxmat test CA", ca_key, ca=True, hosts=False)
    write("ca.pem", _pem(ca))
    server_key = ec.generate_private_key(ec.SECP256R1())
    write("server.pem", _pem(_cert("127.0.0.1", server_key, "fluxmat test CA", ca_key, ca=False, hosts=True)))
    write("server.key", _key_pem(server_key))
    client_key = ec.generate_private_key(ec.SECP256R1())
    write("client.pem", _pem(_cert("fluxmat client", client_key, "fluxmat test CA", ca_key, ca=False, hosts=False)))
    write("client.key", _key_pem(client_key, key_password))
    other_key = ec.generate_private_key(ec.SECP256R1())
    write("wrong-ca.pem", _pem(_cert("another CA", other_key, "another CA", other_key, ca=True, hosts=False)))
    return out
