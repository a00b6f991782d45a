"""`uv run invoke build push`, exactly as a newcomer types it: repo root, no flags.

Checks the image exists, the printed digest is the local registry's manifest digest, the
stamped `dist/spec.yaml` pins `ref@sha256:...`, the repo's spec is unchanged, and a second
run is idempotent and fast. It runs alone (`exclusive`): the classic builder takes the
newest of equivalent cached layers, so another build of the same steps in between (a
benchmark's `--no-cache` build, a release build, on another xdist worker) would make the
second run a new image and push a new digest. Afterwards it stops the local registry and
removes what it made (a registry, image or dist/spec.yaml that was there before is left
as it was).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import yaml

from bandkit.dockercli import docker, image_exists
from bandkit.image import registry as image_registry
from bandkit.image.facts import REPO_ROOT, SPEC
from bandkit.image.push import remote_digest
from bandkit.image.refs import parse_repository
from bandkit.kit import build_push as shortcuts
from bandkit.kit import spec as kitspec
from tasks._common import RUN_DIR_DEFAULT

pytestmark = [pytest.mark.docker, pytest.mark.exclusive]
COMMAND = ["uv", "run", "invoke", "build", "push"]
DIGEST_LINE = re.compile(r"^push: digest (sha256:[0-9a-f]{64})$", re.MULTILINE)
REGISTRY_FOLDER = REPO_ROOT / RUN_DIR_DEFAULT / shortcuts.REGISTRY_FOLDER
CACHED_LIMIT_S = 30.0  # measured about 3 s; generous for a loaded machine


@dataclass(frozen=True)
class Run:
    out: str
    seconds: float


def _as_written() -> Run:
    start = time.monotonic()
    proc = subprocess.run(
        COMMAND, cwd=REPO_ROOT, capture_output=True, text=True, check=False, timeout=1800
    )
    seconds = time.monotonic() - start
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    return Run(proc.stdout, seconds)


@pytest.fixture
def newcomer() -> Iterator[None]:
    """Leave the tree and the daemon as they were: only what this test made goes."""
    had_registry = image_registry.kept_status(REGISTRY_FOLDER) is not None
    had_folder = REGISTRY_FOLDER.exists()
    had_image = image_exists(shortcuts.SOURCE_TAG)
    had_dist = shortcuts.DIST_SPEC.parent.exists()
    old_spec = shortcuts.DIST_SPEC.read_bytes() if shortcuts.DIST_SPEC.exists() else None
    try:
        yield
    finally:
        if not had_registry:
            image_registry.stop_kept(REGISTRY_FOLDER)
            if not had_folder:
                shutil.rmtree(REGISTRY_FOLDER, ignore_errors=True)
        if old_spec is not None:
            shortcuts.DIST_SPEC.write_bytes(old_spec)
        elif had_dist:
            shortcuts.DIST_SPEC.unlink(missing_ok=True)
        else:
            shutil.rmtree(shortcuts.DIST_SPEC.parent, ignore_errors=True)
        if not had_image:
            docker(["rmi", shortcuts.SOURCE_TAG], 120, check=False)


def _stamped_ref() -> str:
    text = shortcuts.DIST_SPEC.read_text(encoding="utf-8")
    assert kitspec.validate_text(text).ok
    return str(yaml.safe_load(text)["sandbox"]["image"])


def test_build_push_as_written_then_again(newcomer: None) -> None:
    repo_spec = SPEC.read_bytes()
    first = _as_written()

    assert image_exists(shortcuts.SOURCE_TAG)
    kept = image_registry.kept_status(REGISTRY_FOLDER)
    assert kept is not None, first.out
    repository = shortcuts.local_repository(kept.addr)
    printed = DIGEST_LINE.findall(first.out)
    assert len(printed) == 1, first.out
    registry_digest = remote_digest(parse_repository(repository), shortcuts.WORK_TAG)
    assert printed[0] == registry_digest
    ref = f"{repository}:{shortcuts.WORK_TAG}@{registry_digest}"
    assert _stamped_ref() == ref
    assert SPEC.read_bytes() == repo_spec
    assert f"the local registry on {kept.addr}" in first.out

    second = _as_written()
    print(f"build push: first run {first.seconds:.1f}s, second (cached) {second.seconds:.1f}s")
    assert DIGEST_LINE.findall(second.out) == printed  # nothing changed, nothing new
    assert f"reusing the local registry on {kept.addr}" in second.out
    assert image_registry.kept_status(REGISTRY_FOLDER) == kept
    assert _stamped_ref() == ref
    assert SPEC.read_bytes() == repo_spec
    assert second.seconds < CACHED_LIMIT_S
