"""The dependency floors check that `nox -s floors` runs.

The session resolves the project's dependencies with uv's `lowest-direct` resolution
(every direct dependency at the floor `pyproject.toml` declares, the rest at their newest)
into a venv of its own, adds the test tools at their locked versions (`locked`), then
runs `python -m bandkit.ci.floors` (`import_all`: every module of ours imports) and the
fast tests in `TESTS`, which between them use every direct dependency.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import tomllib
from collections.abc import Iterable, Sequence
from pathlib import Path

PACKAGES = ("bandkit", "launcher", "smoke", "examples", "tasks")
# Loaded by path inside a box beside its own modules (`brain`), or run as a program.
NOT_IMPORTABLE = ("examples.docker_demo.agent_main",)
# The test tools, at their locked versions: their own floors are not the product's.
TEST_TOOLS = ("pytest", "pytest-asyncio", "pytest-socket", "pytest-timeout", "pytest-xdist")
# Fast tests that use every direct dependency at run time, about 30 s on 2 workers.
TESTS = (
    "tests/test_errors.py",  # invoke: a task run as a user runs it
    "tests/test_help.py",  # invoke: every task's --help
    "tests/test_manifest.py",  # filelock
    "tests/emulator/test_channels.py",  # starlette, uvicorn (websockets-sansio), websockets
    "tests/emulator/test_wire.py",  # the same, and httptools
    "tests/emulator/test_rest_human.py",  # starlette, pydantic, httpx
    "tests/kit/test_registration_faults.py",  # httpx and band_rest, through a fault proxy
    "tests/kit/test_platform_errors.py",  # httpx's error classes
    "tests/kit/test_spec.py",  # pyyaml, ruamel.yaml
    "tests/kit/test_band_yaml_modes.py",  # ruamel.yaml round trips, pydantic
    "tests/fleet/test_spec.py",  # ruamel.yaml line marks, pydantic error locations
    "tests/image/test_build_ca.py",  # cryptography
    "tests/release/test_oci.py",  # oras
    "tests/runtimes/test_keyproxy.py",  # h11
)


def locked(lock: Path, names: Iterable[str] = TEST_TOOLS) -> list[str]:
    """`name==version` for each of `names` as `lock` (a uv.lock) pins it."""
    versions = {p["name"]: p["version"] for p in tomllib.loads(lock.read_text())["package"]}
    missing = [name for name in names if name not in versions]
    if missing:
        raise KeyError(f"{lock} pins none of {', '.join(missing)}")
    return [f"{name}=={versions[name]}" for name in names]


def import_all(packages: Sequence[str] = PACKAGES) -> tuple[int, list[str]]:
    """Import every module of `packages`; (how many imported, one line per failure)."""
    failures: list[str] = []
    count = 0

    def failed(name: str) -> None:
        error = sys.exc_info()[1]
        failures.append(f"{name}: {type(error).__name__}: {error}")

    for top in packages:
        try:
            package = importlib.import_module(top)
        except Exception:  # each failure is the report: go on to the next package
            failed(top)
            continue
        count += 1
        for info in pkgutil.walk_packages(package.__path__, f"{top}.", onerror=failed):
            if info.name in NOT_IMPORTABLE or info.name.rpartition(".")[2] == "__main__":
                continue
            try:
                importlib.import_module(info.name)
            except Exception:  # each failure is the report: go on to the next module
                failed(info.name)
                continue
            count += 1
    return count, failures


def main() -> int:
    count, failures = import_all()
    for line in failures:
        print(f"floors: cannot import {line}", file=sys.stderr)
    print(f"floors: {count} modules imported, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
