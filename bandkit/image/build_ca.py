"""Extra CA certificates for the builder stage: which ones, staging them, and TLS failures.

Behind a TLS-intercepting proxy (a company's, or ours), uv inside the build must trust
the proxy's CA. The host already says which CAs it trusts; `resolve` picks, in order:

1. `--build-ca FILE` (repeatable): exactly these, nothing from the environment;
2. else the files named by `SSL_CERT_FILE` and `REQUESTS_CA_BUNDLE` (deduplicated).

`staged` copies them into the git-ignored `docker/band_python_kit/build-ca/` folder for
the build. The Dockerfile appends that folder to the builder stage's bundle only; the
runtime stage starts again from the base image and copies nothing of it, so no extra CA
reaches the image. Staged names are the content's hash, so the same bundle gives the same
build context (the cache holds) and concurrent builds in one tree agree on the files; a
shared lock keeps one build from removing what another still uses. (One folder for the
tree also means a build started while another runs sees that one's files too: its
builder stage may trust them as well; the runtime image still never does.)

`tls_failure` recognises, in build output, a certificate the builder could not verify for
want of a CA (uv's `invalid peer certificate: UnknownIssuer`, OpenSSL's `unable to get
local issuer certificate`, ...), and `tls_remedy` says which variable, flag and file fix it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bandkit.dockercli import ImageError
from bandkit.fsio import write_atomic
from bandkit.image.facts import BUILD_CA_DIR

HOST_CA_VARIABLES = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")
FLAG = "--build-ca"
# Where common hosts keep the bundle they trust (Debian/Ubuntu, Fedora/RHEL, Alpine/macOS).
SYSTEM_BUNDLES = (
    Path("/etc/ssl/certs/ca-certificates.crt"),
    Path("/etc/pki/tls/certs/ca-bundle.crt"),
    Path("/etc/ssl/cert.pem"),
)
STAGED_PREFIX = "bandkit-build-ca-"
_PEM_BEGIN = b"-----BEGIN CERTIFICATE-----"
# Output lines that mean "no trusted CA for this certificate" (not an expired or
# misnamed one, which no CA fixes).
CA_TRUST_FAILURES = (
    re.compile(r"invalid peer certificate: UnknownIssuer"),  # uv (rustls)
    re.compile(r"unable to get local issuer certificate"),  # OpenSSL: pip, Python, curl, git
    re.compile(r"self[- ]signed certificate in certificate chain"),  # OpenSSL
    re.compile(r"The certificate is NOT trusted"),  # apt over https (GnuTLS)
    re.compile(r"server certificate verification failed"),  # git (GnuTLS)
)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# uv draws its error chain with box characters and a multiplication sign (U+00D7).
_DECORATION = re.compile("^[\\s\u2502\u251c\u2570\u2500\u25b6\u00d7|>*-]+")


class BuildTlsError(ImageError):
    """The build could not verify a TLS certificate: a CA is missing from the builder."""


@dataclass(frozen=True)
class CaFile:
    """One file of CA certificates handed to the builder stage, and who named it."""

    path: Path
    source: str  # "--build-ca", "SSL_CERT_FILE" or "REQUESTS_CA_BUNDLE"
    certificates: int

    def describe(self) -> str:
        plural = "" if self.certificates == 1 else "s"
        return f"{self.path} ({self.source}, {self.certificates} certificate{plural})"


def _certificates(data: bytes) -> int:
    return data.count(_PEM_BEGIN)


def resolve(explicit: Sequence[Path], environ: Mapping[str, str]) -> tuple[list[CaFile], list[str]]:
    """The CA files for the builder, and notes about host settings that were ignored.

    An explicit file that is missing or holds no PEM certificate is an error (it was asked
    for); an environment variable naming such a file is only noted (the host's own tools
    would not use it either).
    """
    if explicit:
        found = []
        for path in explicit:
            if not path.is_file():
                raise ImageError(f"build CA file not found: {path}")
            count = _certificates(path.read_bytes())
            if count == 0:
                raise ImageError(f"build CA file {path} holds no PEM certificate")
            found.append(CaFile(path, FLAG, count))
        return found, []
    found, notes, seen = [], [], set()
    for name in HOST_CA_VARIABLES:
        value = environ.get(name, "")
        if not value:
            continue
        path = Path(value)
        if not path.is_file():
            notes.append(f"{name}={value} is not a file; not given to the builder")
            continue
        if path.resolve() in seen:
            continue
        seen.add(path.resolve())
        count = _certificates(path.read_bytes())
        if count == 0:
            notes.append(f"{name}={value} holds no PEM certificate; not given to the builder")
            continue
        found.append(CaFile(path, name, count))
    return found, notes


def trust_line(cas: Sequence[CaFile]) -> str:
    """The one line a build prints about the CAs its builder stage trusts."""
    if not cas:
        return (
            "builder stage trusts the base image's CAs only (behind a TLS-intercepting "
            f"proxy: set SSL_CERT_FILE or pass {FLAG})"
        )
    return (
        "builder stage also trusts "
        + ", ".join(ca.describe() for ca in cas)
        + "; the runtime image does not"
    )


def staged_name(data: bytes) -> str:
    return f"{STAGED_PREFIX}{hashlib.sha256(data).hexdigest()[:16]}.crt"


@contextlib.contextmanager
def staged(cas: Sequence[CaFile], folder: Path = BUILD_CA_DIR) -> Iterator[list[Path]]:
    """Copy `cas` into `folder` for one build; yield the staged paths.

    Every build holds a shared lock while it stages and builds; the staged files are
    removed only by a build that can then take the lock exclusively (no other build is
    using them), so the last build out cleans up, leftovers of a crashed one included.
    """
    flags = os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    lock = os.open(_lock_file(folder), flags, 0o644)
    try:
        _refuse_foreign_lock(lock, _lock_file(folder))
    except ImageError:
        os.close(lock)
        raise
    try:
        _sweep_if_alone(lock, folder)
        fcntl.flock(lock, fcntl.LOCK_SH)
        paths = []
        for ca in cas:
            data = ca.path.read_bytes()
            target = folder / staged_name(data)
            if not (target.is_file() and target.read_bytes() == data):
                write_atomic(target, data, mode=0o644)
            paths.append(target)
        yield paths
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        _sweep_if_alone(lock, folder)
        os.close(lock)


def _lock_file(folder: Path) -> Path:
    """Outside the build context (a file there would enter it), one per staging folder."""
    key = hashlib.sha256(str(folder.resolve()).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"bandkit-build-ca-{key}.lock"


def _refuse_foreign_lock(lock: int, path: Path) -> None:
    """The lock's name under /tmp is predictable: a file another user made first could be
    held by them for ever (every build would wait). Refuse it, naming the fix."""
    owner = os.fstat(lock).st_uid
    if owner != os.geteuid():
        raise ImageError(
            f"build CA lock {path} belongs to uid {owner}, not to us: another user may have "
            "made it to stall the build; remove it and re-run"
        )


def _sweep_if_alone(lock: int, folder: Path) -> None:
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return
    try:
        for leftover in folder.glob(f"{STAGED_PREFIX}*"):
            leftover.unlink(missing_ok=True)
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)


def clean_line(line: str) -> str:
    """An output line without colour codes and uv's tree decoration."""
    return _DECORATION.sub("", _ANSI.sub("", line)).strip()


def tls_failure(lines: Iterable[str]) -> str | None:
    """The first output line that says a certificate's issuer is not trusted, or None."""
    for line in lines:
        text = clean_line(line)
        if any(pattern.search(text) for pattern in CA_TRUST_FAILURES):
            return text[:200]
    return None


def system_bundle(candidates: Sequence[Path] = SYSTEM_BUNDLES) -> Path | None:
    """The host's own trust bundle, where one of the usual places has it."""
    return next((path for path in candidates if path.is_file()), None)


def tls_remedy(evidence: str, cas: Sequence[CaFile], bundle: Path | None) -> str:
    """What to do when the builder could not verify a certificate (one line)."""
    file = str(bundle) if bundle else "/path/to/ca-bundle.pem"
    head = (
        f"the build could not verify a TLS certificate ({evidence}): a TLS-intercepting "
        "proxy between the build and PyPI presents a CA the builder stage does not trust"
    )
    if cas:
        given = ", ".join(ca.describe() for ca in cas)
        what = (
            f"; it was given {given}, which lacks that CA. Point SSL_CERT_FILE at a bundle "
            f"that holds the proxy's CA, or add the CA file with `{FLAG} FILE`"
        )
    else:
        what = (
            f"; no extra CA was given. Export SSL_CERT_FILE={file} (or REQUESTS_CA_BUNDLE; "
            "a bundle holding the proxy's CA, such as the host's own when the host trusts "
            f"the proxy) and run it again, or pass `uv run invoke image.build {FLAG} FILE`"
        )
    where = "docker/band_python_kit/build-ca/README.md"
    return f"{head}{what} (it reaches the builder stage only: {where})"
