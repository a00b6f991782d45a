"""An image-like SDK home outside /root, for running launchers as the agent uid.

Builds what the kit image has under /opt/band, in any world-readable directory:
`venv/` (a venv on Debian's /usr/bin/python3 holding the launcher, its runtime
dependencies at this project's locked versions, and optionally band-sdk for the
repo phase and the upstream launcher) and `bin/uv` (a copy of the uv binary).
Used by the launcher's end-to-end tests and by the launcher benchmark.

`ensure_seed` makes (once per machine, lock and tool versions) a seed: a uv cache holding
the starter agent's locked wheels, unpacked and compiled for that python, and records its
path in the home (`uv-seed`). A box's own cache starts as a copy of it (`hostbox`), so an
agent on the kit's band-sdk syncs without a download and starts without compiling it.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

import launcher
from bandkit import tools
from bandkit.errors import BandkitError
from bandkit.fsio import UnsafePathError, read_regular, write_atomic
from bandkit.image.facts import STARTER_DIR, state_home

BASE_PYTHON = Path("/usr/bin/python3")
RUNTIME_DISTRIBUTIONS = ("pydantic", "pyyaml", "filelock")
SDK_DISTRIBUTION = "band-sdk"
SEEDS_DIR = "uv-seeds"  # under state_home(): the uv caches a box's own starts as a copy of
SEED_RECORD = "uv-seed"  # in the SDK home: the path of the seed made for it
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


def ensure_seed(home: SdkHome, project: Path = STARTER_DIR) -> Path:
    """The machine's seed for `home` (as root: state_home()/uv-seeds/<key>), made once and
    recorded in the home (`recorded_seed`). The key digests `project`'s lock and
    pyproject.toml, the home's uv and python versions: a changed lock or tool gets a seed
    of its own.

    A seed is a uv cache of `project`'s locked dependencies (the starter agent's, a lock
    this repo ships, never a sandbox's), their modules compiled by the home's python.
    Wheels only (`--no-build`), so no package's code runs here. It is made beside its
    place under a lock and renamed into it, so a seed that exists is whole. The venv it is
    synced into is thrown away: uv hard-links from its cache, so the compiled files reach
    every venv later synced from a copy of the cache."""
    lock, pyproject = (project / "uv.lock").read_bytes(), (project / "pyproject.toml").read_bytes()
    versions = tools.run(
        [str(home.uv), "--version"], what="SDK home", timeout=30, error=SdkHomeError
    ).stdout
    versions += tools.run(
        [str(home.python), "-c", "import sys; print(sys.version)"],
        what="SDK home",
        timeout=30,
        error=SdkHomeError,
    ).stdout
    key = hashlib.sha256(lock + pyproject + versions.encode()).hexdigest()[:16]
    seeds = state_home() / SEEDS_DIR
    seeds.mkdir(mode=0o700, parents=True, exist_ok=True)
    seed = seeds / key
    with FileLock(str(seeds / f".{key}.lock"), timeout=TIMEOUT_S):
        if not seed.is_dir():
            _make_seed(home, lock, pyproject, seed)
    write_atomic(home.root / SEED_RECORD, f"{seed}\n")
    return seed


def _make_seed(home: SdkHome, lock: bytes, pyproject: bytes, seed: Path) -> None:
    partial = seed.with_name(f".{seed.name}.partial")
    shutil.rmtree(partial, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="bandkit-seed-") as scratch:
        work = Path(scratch)
        (work / "uv.lock").write_bytes(lock)
        (work / "pyproject.toml").write_bytes(pyproject)
        env = {
            "UV_CACHE_DIR": str(partial),
            "UV_PROJECT_ENVIRONMENT": str(work / "venv"),
            "UV_PYTHON": str(home.python),
            "UV_PYTHON_DOWNLOADS": "never",
        }
        sync = [str(home.uv), "sync", "--quiet", "--locked", "--no-build", "--project", str(work)]
        _run(sync, env)
    _run([str(home.python), "-m", "compileall", "-q", str(partial / "archive-v0")])
    partial.rename(seed)


def recorded_seed(root: Path) -> Path | None:
    """The seed the SDK home at `root` recorded (`ensure_seed`), if it did and it exists."""
    try:
        raw, _ = read_regular(root / SEED_RECORD, what="the SDK home's seed record")
    except (OSError, UnsafePathError):
        return None
    seed = Path(raw.decode("utf-8", "replace").strip())
    return seed if seed.is_absolute() and seed.is_dir() and not seed.is_symlink() else None
