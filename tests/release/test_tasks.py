"""The release tasks as a user types them: one-line errors, the documented exit codes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from bandkit.image.facts import REPO_ROOT

DATA = REPO_ROOT / "tests" / "release" / "data"


def invoke(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("INVOKE_RELEASE_")}
    return subprocess.run(
        [sys.executable, "-m", "invoke", *argv], cwd=REPO_ROOT, capture_output=True,
        text=True, check=False, timeout=120, env={**clean, **(env or {})},
    )  # fmt: skip


def nobody_listens() -> dict[str, str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        addr = f"127.0.0.1:{probe.getsockname()[1]}"
    return {
        "INVOKE_RELEASE_HUB_IMAGE": f"{addr}/bandhq/band-python-kit-image",
        "INVOKE_RELEASE_HUB_KIT": f"{addr}/bandhq/band-python-kit",
        "INVOKE_RELEASE_GHCR_IMAGE": f"{addr}/band-ai/band-python-kit/image",
        "INVOKE_RELEASE_GHCR_KIT": f"{addr}/band-ai/band-python-kit",
    }


def test_publish_without_registries_says_which_setting_is_missing() -> None:
    proc = invoke("release.publish", "--version", "1.0.0")
    assert proc.returncode == 1
    assert proc.stderr.startswith("release.publish: release.hub_image is not set")
    assert "Traceback" not in proc.stderr


def test_publish_needs_a_version_in_the_grammar() -> None:
    proc = invoke("release.publish", "--version", "1.2", env=nobody_listens())
    assert proc.returncode == 1
    assert "version must be X.Y.Z" in proc.stderr


def test_a_registry_that_does_not_answer_fails_closed_with_exit_2() -> None:
    argv = ("release.publish", "--version", "0.0.0-rc1", "--dry-run", "--allow-dirty")
    proc = invoke(*argv, env=nobody_listens())
    assert proc.returncode == 2, proc.stderr
    assert "fail closed (exit 2)" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_rebuild_against_no_registry_fails_closed() -> None:
    proc = invoke("release.rebuild", "--dry-run", env=nobody_listens())
    assert proc.returncode == 2
    assert proc.stderr.startswith("release.rebuild: hub: registry 127.0.0.1:")


def test_lock_age_exit_codes_are_upstream_s() -> None:
    passing = invoke("release.lock-age", "--lock", str(DATA / "small.lock"), "--days", "0")
    assert passing.returncode == 0
    assert passing.stdout.startswith("quarantine gate: pass")
    missing = invoke("release.lock-age", "--lock", str(DATA / "no_upload_time.lock"))
    assert missing.returncode == 1
    assert "no upload time in the lock" in missing.stdout
    unreadable = invoke("release.lock-age", "--lock", str(DATA / "malformed.lock"))
    assert unreadable.returncode == 2
    assert "cannot check the lock" in unreadable.stdout
