"""An image-like SDK home outside /root, for running launchers as the agent uid.

Builds what the kit image has under /opt/band, in any world-readable directory:
`venv/` (a venv on Debian's /usr/bin/python3 holding the launcher, its runtime
dependencies at this project's locked versions, and optionally band-sdk for the
repo phase and the upstream launcher) and `bin/uv` (a copy of the uv binary).
Used by the launcher's end-to-end tests and by the launcher benchmark.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import launcher
from bandkit import tools
from bandkit.errors import BandkitError

BASE_PYTHON = Path("/usr/bin/python3")
RUNTIME_DISTRIBUTIONS = ("pydantic", "pyyaml", "filelock")
SDK_DISTRIBUTION = "band-sdk"
TIMEOUT_S = 900.0


class SdkHomeError(BandkitError):
    """The SDK home could not be built; the message says what is missing."""


@dataclass(frozen=True)
class SdkHome:
    root: Path
    python: Path
    uv: Path

    def environment(self) -> dict[str, str]:
        """The image's contract variables for this SDK home."""
        return {
            "BAND_SDK_HOME": str(self.root),
            "BAND_SDK_PYTHON": str(self.python),
            "BAND_SDK_UV": str(self.uv),
        }


def _is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            return handle.read(4) == b"\x7fELF"
    except OSError:
        return False


def find_uv_binary() -> Path:
    """The real uv executable (`uv run` exports UV; PATH may only hold a shim)."""
    candidates = [os.environ.get("UV", ""), shutil.which("uv") or ""]
    pyenv = shutil.which("pyenv")
    if pyenv:
        found = tools.run(
            [pyenv, "which", "uv"], what="SDK home", timeout=30, check=False, error=SdkHomeError
        )
        candidates.append(found.stdout.strip())
    for candidate in candidates:
        if candidate and _is_elf(Path(candidate).resolve()):
            return Path(candidate).resolve()
    raise SdkHomeError("no uv executable found (install uv, or run under `uv run`)")


def _pins(names: tuple[str, ...]) -> list[str]:
    return [f"{name}=={importlib.metadata.version(name)}" for name in names]


def _run(argv: list[str], env: dict[str, str] | None = None) -> None:
    tools.run(
        argv,
        what="SDK home",
        timeout=TIMEOUT_S,
        env=env,
        unset=("VIRTUAL_ENV",),
        error=SdkHomeError,
    )


def build_sdk_home(root: Path, *, with_band_sdk: bool, cache_dir: Path | None = None) -> SdkHome:
    """Create root/venv and root/bin/uv, readable and executable by every uid."""
    if not BASE_PYTHON.is_file():
        raise SdkHomeError(f"{BASE_PYTHON} is missing (the SDK venv is built on it)")
    uv = root / "bin" / "uv"
    uv.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(find_uv_binary(), uv)
    venv = root / "venv"
    env = {"UV_PYTHON_DOWNLOADS": "never"}
    if cache_dir is not None:
        env["UV_CACHE_DIR"] = str(cache_dir)
    _run([str(uv), "venv", "--quiet", "--python", str(BASE_PYTHON), str(venv)], env)
    packages = _pins(RUNTIME_DISTRIBUTIONS)
    if with_band_sdk:
        packages += _pins((SDK_DISTRIBUTION,))
    python = venv / "bin" / "python"
    # Compiled now: the box uids cannot write bytecode into this root-owned venv, so
    # without it every agent start would compile pydantic and the rest from source.
    install = [str(uv), "pip", "install", "--quiet", "--compile-bytecode"]
    _run([*install, "--python", str(python), *packages], env)
    site = next((venv / "lib").glob("python3*/site-packages"))
    shutil.copytree(
        Path(launcher.__file__).parent,
        site / "launcher",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    _run([str(python), "-m", "compileall", "-q", str(site / "launcher")])
    for path in (root, *root.rglob("*")):
        mode = path.lstat().st_mode
        if not path.is_symlink():
            path.chmod(mode | 0o444 | (0o111 if path.is_dir() or mode & 0o100 else 0))
    return SdkHome(root=root, python=python, uv=uv)
