"""The pinned codex CLI without node or npm: the lock's one platform package, checked
against the lock's integrity, unpacked.

`docker/band_python_kit/codex/package-lock.json` pins `@openai/codex` and, per platform,
the package that carries its native binary: `@openai/codex-linux-x64` is an alias of
`@openai/codex@<version>-linux-x64`. `fetch(lock_dir, dest)` reads the entry for this
machine's CPU, downloads that one tarball from the npm registry (`NPM_CONFIG_REGISTRY`,
as npm reads it; default https://registry.npmjs.org), refuses it unless its SHA-512 is
the lock's `integrity`, unpacks it under `dest` (tarfile's `data` filter: nothing lands
outside `dest`) and returns the folder holding `codex-package.json` and `bin/codex`. That
folder is all of what `npm ci --ignore-scripts` of the lock installed that the kit runs
(no install script runs either way), in one download of about 170 MB instead of Debian's
node and npm (some 500 packages) plus npm's own work.

Standard library only, on purpose: the CLI image's codex stage runs this file as a script
on the bare Python base (`python3 codex_fetch.py LOCK_DIR DEST` prints the folder; exit 1
with the reason), and the local runtime imports it (`bandkit.demo.codex_local`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import platform
import sys
import tarfile
import tempfile
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

PACKAGE: Final = "@openai/codex"
REGISTRY_ENV: Final = "NPM_CONFIG_REGISTRY"
DEFAULT_REGISTRY: Final = "https://registry.npmjs.org"
# uname -m (and Debian's architecture names) -> npm's `cpu` names in the lock
CPUS: Final = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}
DOWNLOAD_TIMEOUT_S: Final = 300.0
CHUNK: Final = 1 << 20


class CodexFetchError(Exception):
    """An expected failure; the message names what failed and what to do."""


@dataclass(frozen=True)
class Pin:
    """One platform package of the lock: its registry name, version and integrity."""

    name: str
    version: str
    integrity: str

    def url(self, registry: str) -> str:
        """The tarball's address on `registry`, as npm lays it out."""
        base = self.name.rsplit("/", 1)[-1]
        return f"{registry.rstrip('/')}/{self.name}/-/{base}-{self.version}.tgz"


def npm_cpu(machine: str = "") -> str:
    """npm's name for this machine's CPU (`x64`, `arm64`)."""
    key = (machine or platform.machine()).lower()
    if key not in CPUS:
        raise CodexFetchError(f"codex ships no Linux build for CPU {key!r} (x86_64 or aarch64)")
    return CPUS[key]


def read_pin(lock_dir: Path, cpu: str) -> Pin:
    """The lock's `@openai/codex-linux-<cpu>` entry, checked against package.json's pin."""
    relock = f"re-lock it: `npm install --package-lock-only` in {lock_dir}"
    try:
        wanted = _json(lock_dir / "package.json")["dependencies"][PACKAGE]
        packages = _json(lock_dir / "package-lock.json")["packages"]
        top = packages[f"node_modules/{PACKAGE}"]
        alias = f"{PACKAGE}-linux-{cpu}"
        spec = top["optionalDependencies"][alias]
        entry = packages[f"node_modules/{alias}"]
        pin = Pin(entry.get("name", alias), entry["version"], entry["integrity"])
        fits = "linux" in entry.get("os", []) and cpu in entry.get("cpu", [])
    except (KeyError, TypeError, AttributeError) as exc:
        raise CodexFetchError(
            f"the codex lock in {lock_dir} has no {exc} where expected; {relock}"
        ) from None
    if top.get("version") != wanted:
        raise CodexFetchError(
            f"the codex lock holds {top.get('version')!r}, package.json pins {wanted!r}; {relock}"
        )
    if spec != f"npm:{pin.name}@{pin.version}" or not fits:
        raise CodexFetchError(f"the lock's {alias} entry is not linux/{cpu} codex; {relock}")
    if not pin.integrity.startswith("sha512-"):
        raise CodexFetchError(f"the lock's {alias} entry has no sha512 integrity; {relock}")
    return pin


def fetch(lock_dir: Path, dest: Path, *, registry: str = "", cpu: str = "") -> Path:
    """Download, check and unpack this machine's codex package under `dest` (made if
    missing); the folder holding its `codex-package.json`."""
    pin = read_pin(lock_dir, cpu or npm_cpu())
    url = pin.url(registry or os.environ.get(REGISTRY_ENV, "").strip() or DEFAULT_REGISTRY)
    if urllib.parse.urlsplit(url).scheme not in ("https", "http"):
        raise CodexFetchError(f"{REGISTRY_ENV} must be an http(s) address, got {url!r}")
    try:
        dest.mkdir(parents=True, exist_ok=True)
        archive = tempfile.TemporaryFile(dir=dest)  # noqa: SIM115 (closed by the with below)
    except OSError as exc:
        raise CodexFetchError(f"cannot write the codex CLI into {dest}: {exc}") from None
    with archive:
        digest = hashlib.sha512()
        try:
            # http(s) only: checked above
            with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response:  # noqa: S310
                while chunk := response.read(CHUNK):
                    digest.update(chunk)
                    archive.write(chunk)
        except (OSError, ValueError) as exc:  # URLError and socket errors are OSErrors
            raise CodexFetchError(
                f"downloading {url} failed: {exc}; check the network, or set {REGISTRY_ENV} "
                "to the npm registry this machine reaches"
            ) from None
        got = "sha512-" + base64.b64encode(digest.digest()).decode()
        if got != pin.integrity:
            raise CodexFetchError(
                f"{url} is not the locked package (sha512 {got[7:23]}..., the lock says "
                f"{pin.integrity[7:23]}...): refused, nothing unpacked"
            )
        archive.seek(0)
        try:
            with tarfile.open(fileobj=archive, mode="r:gz") as tar:
                tar.extractall(dest, filter="data")
        except (tarfile.TarError, OSError) as exc:
            raise CodexFetchError(f"unpacking {url} into {dest} failed: {exc}") from None
    found = sorted(dest.glob("package/vendor/*/codex-package.json"))
    if len(found) != 1 or not (found[0].parent / "bin" / "codex").is_file():
        raise CodexFetchError(f"expected one codex build in {dest}/package/vendor, found {found}")
    return found[0].parent


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CodexFetchError(f"cannot read the codex pin {path}: {exc}") from None


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0].startswith("-"):
        print("usage: python3 codex_fetch.py LOCK_DIR DEST", file=sys.stderr)
        return 2
    try:
        print(fetch(Path(argv[0]), Path(argv[1])))
    except CodexFetchError as exc:
        print(f"codex_fetch: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
