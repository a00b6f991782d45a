"""Facts about the kit image, each stated once.

The Dockerfile's single-line `ARG NAME=default` pins are the source of truth for the base
images (a rebuild job rewrites them in place); everything here that depends on them is
derived by reading the Dockerfile, never retyped.
"""

from __future__ import annotations

import os
import platform as _platform_mod
import re
from functools import cache
from pathlib import Path

from bandkit.dockercli import ImageError

REPO_ROOT = Path(__file__).resolve().parents[2]
KIT_DIR = REPO_ROOT / "docker" / "band_python_kit"
DOCKERFILE = KIT_DIR / "Dockerfile"
SPEC = KIT_DIR / "spec.yaml"  # the current shape (sbx 0.42.1+): what `--kit KIT_DIR` reads
# The legacy shape (sbx below 0.42.1) lives in a kit directory of its own, named for the
# sbx it is for; a release publishes it under the kit tag `X.Y.Z-<this name>`.
LEGACY_KIT_NAME = "sbx-below-0.42.1"
LEGACY_KIT_DIR = KIT_DIR / LEGACY_KIT_NAME
SPEC_LEGACY = LEGACY_KIT_DIR / "spec.yaml"
SDK_PROJECT = KIT_DIR / "sdk"
STARTER_DIR = KIT_DIR / "echo-agent"  # the starter agent the kit ships
BUILD_CA_DIR = KIT_DIR / "build-ca"

IMAGE_NAME = "band-python-kit"
LOCAL_TAG = f"{IMAGE_NAME}:local"
LOCAL_PYTHON_REPO = "local/debian-python"
LOCAL_UV_REPO = "local/uv"
# The invoke setting `push` reads (`registry: HOST[:PORT]/NAME` in invoke.yaml); the
# collection's default is empty: no registry, so `push` uses a local one it starts.
REGISTRY_SETTING = "registry"

_ARG = re.compile(r"^ARG (?P<name>[A-Z_]+)=(?P<value>\S*)$", re.MULTILINE)
_UV_TAG = re.compile(r":(?P<version>\d+\.\d+\.\d+)@sha256:[0-9a-f]{64}$")
# python:<X.Y[.Z]>-[slim-]<debian suite>@sha256:<64 hex>, as the official images are tagged.
_PYTHON_TAG = re.compile(
    r":(?P<python>\d+\.\d+(\.\d+)?)-(slim-)?(?P<suite>[a-z]+)@sha256:[0-9a-f]{64}$"
)


@cache
def dockerfile_args(path: Path = DOCKERFILE) -> dict[str, str]:
    """`ARG NAME=value` defaults declared on single lines (global and per stage)."""
    return {m["name"]: m["value"] for m in _ARG.finditer(path.read_text(encoding="utf-8"))}


def official_python_base() -> str:
    return dockerfile_args()["PYTHON_BASE_IMAGE"]


def official_uv_image() -> str:
    return dockerfile_args()["UV_IMAGE"]


def uv_version() -> str:
    """The pinned uv version, read from the UV_IMAGE tag."""
    match = _UV_TAG.search(official_uv_image())
    if match is None:
        raise ImageError(f"UV_IMAGE in {DOCKERFILE} is not pinned as <repo>:X.Y.Z@sha256:<64 hex>")
    return match["version"]


def _python_pin() -> re.Match[str]:
    match = _PYTHON_TAG.search(official_python_base())
    if match is None:
        raise ImageError(
            f"PYTHON_BASE_IMAGE in {DOCKERFILE} is not pinned as "
            "<repo>:X.Y[.Z]-[slim-]<suite>@sha256:<64 hex>"
        )
    return match


def official_suite() -> str:
    """The Debian release of the official base (`trixie`); the local bases debootstrap it."""
    return _python_pin()["suite"]


def official_python_version() -> str:
    """The Python version of the official base, from its tag (`3.12.13`)."""
    return _python_pin()["python"]


def host_arch() -> str:
    """Docker's name for this machine's architecture (amd64, arm64)."""
    machine = _platform_mod.machine().lower()
    return {"x86_64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(machine, machine)


def state_home() -> Path:
    """Where the image tools keep their own files: root's /var/lib/bandkit, else the
    user's cache ($XDG_CACHE_HOME/bandkit)."""
    if os.geteuid() == 0:
        return Path("/var/lib/bandkit")
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "bandkit"
