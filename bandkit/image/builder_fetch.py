"""Fetch Debian trixie's docker.io, docker-buildx and containerd .debs and unpack them.

Plain HTTP from deb.debian.org, trusted the way apt trusts it: the suite's `InRelease` must
carry a good signature from the host's Debian archive keyring (checked with `gpgv`), the
Packages index must match the SHA256 the signed Release lists, and each .deb the SHA256 in
that index. Nothing is installed: `dpkg-deb -x` into a private root.
"""

from __future__ import annotations

import hashlib
import lzma
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx

from bandkit.errors import BandkitError

DEBIAN_MIRROR = "http://deb.debian.org/debian"
SUITE = "trixie"
PACKAGES = ("docker.io", "docker-buildx", "containerd")
INDEX = "main/binary-amd64/Packages.xz"
KEYRING = Path("/usr/share/keyrings/debian-archive-keyring.gpg")
MARKER = ".bandkit-packages"  # "<package> <version>" per line, written once unpacked
HTTP_TIMEOUT_S = 300.0
Progress = Callable[[str], None]


class SideDockerError(BandkitError):
    """An expected failure of the side builder; the message says what to do."""


def parse_packages(index: str, names: Sequence[str]) -> dict[str, dict[str, str]]:
    """Package name -> its `Version`, `Filename`, `SHA256` from a Debian Packages index."""
    found: dict[str, dict[str, str]] = {}
    for stanza in index.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in stanza.splitlines() if ": " in line and line[0] != " "
        )
        if fields.get("Package") in names and fields.get("Architecture") in ("amd64", "all"):
            found[fields["Package"]] = {k: fields[k] for k in ("Version", "Filename", "SHA256")}
    missing = [n for n in names if n not in found]
    if missing:
        raise SideDockerError(f"{SUITE} has no {', '.join(missing)} for amd64")
    return found


def release_sha256(release: str, path: str) -> str:
    """The SHA256 a (verified) Release file lists for `path` (e.g. main/binary-amd64/...)."""
    section = release.split("\nSHA256:\n", 1)
    for line in section[1].splitlines() if len(section) == 2 else ():
        if not line.startswith(" "):
            break
        fields = line.split()
        if len(fields) == 3 and fields[2] == path:
            return fields[0]
    raise SideDockerError(f"the {SUITE} Release file lists no SHA256 for {path}")


def verified_release(inrelease: bytes, keyring: Path = KEYRING) -> str:
    """The signed text of an InRelease file, or SideDockerError unless `gpgv` finds it good."""
    if shutil.which("gpgv") is None:
        raise SideDockerError("gpgv is missing (apt-get install gpgv)")
    if not keyring.is_file():
        raise SideDockerError(f"{keyring} is missing (apt-get install debian-archive-keyring)")
    with tempfile.TemporaryDirectory(prefix="bandkit-release-") as folder:
        signed, text = Path(folder) / "InRelease", Path(folder) / "Release"
        signed.write_bytes(inrelease)
        proc = subprocess.run(
            ["gpgv", "--keyring", str(keyring), "--output", str(text), str(signed)],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        if proc.returncode != 0 or not text.is_file():
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise SideDockerError(
                f"the {SUITE} InRelease signature does not verify against {keyring}: {last}"
            )
        return text.read_text(encoding="utf-8")


def fetch_debs(debs: Path, root: Path, progress: Progress = print) -> list[str]:
    """Download (SHA256-checked) and unpack trixie's .debs into `root` unless already there."""
    marker = root / MARKER
    if marker.is_file():
        return [f"packages: present ({marker.read_text().strip().replace(chr(10), ', ')})"]
    if shutil.which("dpkg-deb") is None:
        raise SideDockerError("dpkg-deb is missing (a Debian/Ubuntu host needed)")
    suite_url = f"{DEBIAN_MIRROR}/dists/{SUITE}"
    try:
        with httpx.Client(timeout=HTTP_TIMEOUT_S, follow_redirects=True) as client:
            inrelease = client.get(f"{suite_url}/InRelease")
            inrelease.raise_for_status()
            expected = release_sha256(verified_release(inrelease.content), INDEX)
            response = client.get(f"{suite_url}/{INDEX}")
            response.raise_for_status()
            if hashlib.sha256(response.content).hexdigest() != expected:
                raise SideDockerError(
                    f"{SUITE} {INDEX} does not match its signed Release; "
                    "retry later (a mirror mid-update) or check the network path"
                )
            wanted = parse_packages(lzma.decompress(response.content).decode(), PACKAGES)
            debs.mkdir(parents=True, exist_ok=True)
            for name, meta in wanted.items():
                deb = debs / Path(meta["Filename"]).name
                if not deb.is_file() or _sha256(deb) != meta["SHA256"]:
                    progress(f"image.builder: downloading {name} {meta['Version']}")
                    body = client.get(f"{DEBIAN_MIRROR}/{meta['Filename']}")
                    body.raise_for_status()
                    if hashlib.sha256(body.content).hexdigest() != meta["SHA256"]:
                        raise SideDockerError(f"{deb.name}: SHA256 mismatch")
                    deb.write_bytes(body.content)
    except httpx.HTTPError as exc:
        raise SideDockerError(f"cannot fetch from {DEBIAN_MIRROR}: {exc}") from None
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    for meta in wanted.values():
        _unpack(debs / Path(meta["Filename"]).name, root)
    versions = "\n".join(f"{name} {meta['Version']}" for name, meta in wanted.items())
    marker.write_text(versions + "\n")
    return [f"unpacked {name} {meta['Version']}" for name, meta in wanted.items()]


def _unpack(deb: Path, root: Path) -> None:
    proc = subprocess.run(
        ["dpkg-deb", "-x", str(deb), str(root)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    if proc.returncode != 0:
        raise SideDockerError(f"dpkg-deb -x {deb.name} failed: {proc.stderr.strip()}")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
