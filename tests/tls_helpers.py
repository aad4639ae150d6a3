"""TLS material made with openssl for tests that need keys of every kind (a private CA, a client certificate,
its key as PKCS#8, encrypted PKCS#8 (PBES1 and OpenSSL's default PBES2) and traditional PKCS#1)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ClientTls:
    """A CA, a client certificate it signed, and the certificate's key in several encodings."""

    ca_file: Path
    cert_file: Path
    key_pkcs8: Path
    key_pbes1: Path  # encrypted with key_password (PBE-SHA1-3DES: what Java 17's Kafka client decrypts)
    key_pbes2: Path  # encrypted with key_password (OpenSSL's default: librdkafka only)
    key_pkcs1: Path  # BEGIN RSA PRIVATE KEY (librdkafka only)
    key_password_file: Path


def _openssl(folder: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True, timeout=60)


def make_client_tls(folder: Path, key_password: str, ca: tuple[Path, Path] | None = None) -> ClientTls:
    """Write a CA (or use ``ca``: its certificate and key) and a client certificate with its keys into
    ``folder``; the encrypted keys take ``key_password`` from a file (never a command line)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "key.password").write_text(key_password)
    if ca is None:
        _openssl(folder, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
                 "-days", "2", "-subj", "/CN=test CA", "-addext", "basicConstraints=critical,CA:TRUE")
        ca = (folder / "ca.pem", folder / "ca.key")
    (folder / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    _openssl(folder, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "client.key", "-out", "client.csr",
             "-subj", "/CN=driftwarden-test")
    _openssl(folder, "x509", "-req", "-in", "client.csr", "-CA", str(ca[0]), "-CAkey", str(ca[1]),
             "-CAcreateserial", "-out", "client.pem", "-days", "2", "-extfile", "client.ext")
    _openssl(folder, "pkcs8", "-topk8", "-v1", "PBE-SHA1-3DES", "-in", "client.key", "-out", "client.pbes1.key",
             "-passout", "file:key.password")
    _openssl(folder, "pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", "client.key", "-out", "client.pbes2.key",
             "-passout", "file:key.password")
    _openssl(folder, "rsa", "-in", "client.key", "-traditional", "-out", "client.pkcs1.key")
    return ClientTls(ca[0], folder / "client.pem", folder / "client.key", folder / "client.pbes1.key",
                     folder / "client.pbes2.key", folder / "client.pkcs1.key", folder / "key.password")
