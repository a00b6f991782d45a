"""The release rehearsal: `invoke release.publish --version 0.0.0-rc1` against two registries.

Two throwaway registries on 127.0.0.1 stand in for Docker Hub and GHCR (one Hub-style and
one GHCR-style name each, from `INVOKE_RELEASE_*`). One publish builds amd64 + arm64
once (the local bases; arm64 under qemu) and is shared by every case here:
- both registries serve the same index digest, listing linux/amd64 and linux/arm64;
- each kit artifact's config is the spec stamped with that registry's own reference: the
  current shape at `0.0.0-rc1` (what today's sbx reads), the legacy one at
  `0.0.0-rc1-sbx-below-0.42.1` (sbx below 0.42.1);
- a second run refuses (exit 2) and changes nothing;
- a registry that already has a version heals the other by copy (no build step);
- a registry that goes down mid-run stops the release before any floating tag moves.

The rehearsal passes `--allow-dirty` (pre-releases only) so it also runs on a checkout
with uncommitted work. The registry-down case needs a release version (pre-releases never
move floating tags), whose git tag this checkout does not have: it calls the same
`publish` in-process with the git state given, and takes the registry down from the
progress callback the moment the commit point's verification starts.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from bandkit.image.facts import REPO_ROOT, SPEC, SPEC_LEGACY
from bandkit.image.refs import parse_repository
from bandkit.image.registry import local_registry
from bandkit.kit.spec import stamp, validate_text
from bandkit.release import kit_artifact, settings
from bandkit.release.execute import ReleaseStopped
from bandkit.release.gather import GitState
from bandkit.release.oci import Registries
from bandkit.release.publish import publish

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1800)]
RC1, RC2, RELEASE = "0.0.0-rc1", "0.0.0-rc2", "0.0.1"
LEGACY = "-sbx-below-0.42.1"  # the legacy-shape kit's tag suffix
ACCEPT = ", ".join(
    (
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    )
)


@dataclass(frozen=True)
class Pair:
    hub: str
    ghcr: str

    def config(self, ghcr: str | None = None) -> dict[str, str]:
        other = ghcr or self.ghcr
        return {
            "hub_image": f"{self.hub}/bandhq/band-python-kit-image",
            "hub_kit": f"{self.hub}/bandhq/band-python-kit",
            "ghcr_image": f"{other}/band-ai/band-python-kit/image",
            "ghcr_kit": f"{other}/band-ai/band-python-kit",
            "base": "local",
        }

    def env(self) -> dict[str, str]:
        return {f"INVOKE_RELEASE_{k.upper()}": v for k, v in self.config().items()}

    def repos(self) -> list[str]:
        return [v for k, v in self.config().items() if k != "base"]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    with (
        local_registry(tmp_path_factory.mktemp("hub")) as hub,
        local_registry(tmp_path_factory.mktemp("ghcr")) as ghcr,
    ):
        yield Pair(hub, ghcr)


def _publish(pair: Pair, version: str) -> subprocess.CompletedProcess[str]:
    argv = ["invoke", "release.publish", "--version", version, "--allow-dirty"]
    return subprocess.run(
        argv, cwd=REPO_ROOT, capture_output=True, text=True, check=False, timeout=1500,
        env={**os.environ, **pair.env()},
    )  # fmt: skip


def _get(repo: str, reference: str, kind: str = "manifests") -> httpx.Response:
    parsed = parse_repository(repo)
    url = f"http://{parsed.host}/v2/{parsed.name}/{kind}/{reference}"
    return httpx.get(url, headers={"Accept": ACCEPT}, timeout=30)


def _digest(repo: str, tag: str) -> str | None:
    response = _get(repo, tag)
    if response.status_code == 404:
        return None
    assert response.status_code == 200, response.text
    return "sha256:" + hashlib.sha256(response.content).hexdigest()


def _state(pair: Pair) -> dict[str, dict[str, str | None]]:
    """Every tag of every repository and what it resolves to."""
    found: dict[str, dict[str, str | None]] = {}
    for repo in pair.repos():
        parsed = parse_repository(repo)
        listed = httpx.get(f"http://{parsed.host}/v2/{parsed.name}/tags/list", timeout=30)
        tags = listed.json().get("tags") or [] if listed.status_code == 200 else []
        found[repo] = {tag: _digest(repo, tag) for tag in tags}
    return found


RECORD = REPO_ROOT / "dist" / "release.json"
RECORDED: dict[str, object] = {}  # what the rehearsal's publish recorded for the workflow


@pytest.fixture(scope="module")
def first(pair: Pair, arm64_kit_cache: None) -> Iterator[subprocess.CompletedProcess[str]]:
    """The rehearsal itself: one build, both registries (shared by every case), after the
    run's arm64 build (its layers are the rehearsal's too: same inputs, the host's CA).
    The checkout's dist/release.json is put back as it was afterwards."""
    before = RECORD.read_bytes() if RECORD.is_file() else None
    try:
        done = _publish(pair, RC1)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr
        RECORDED.update(json.loads(RECORD.read_text()))
        yield done
    finally:
        if before is None:
            RECORD.unlink(missing_ok=True)
        else:
            RECORD.write_bytes(before)


def test_both_registries_serve_one_index_with_both_platforms(
    first: subprocess.CompletedProcess[str], pair: Pair
) -> None:
    config = pair.config()
    digests = {_digest(config[k], RC1) for k in ("hub_image", "ghcr_image")}
    assert len(digests) == 1
    assert None not in digests
    for key in ("hub_image", "ghcr_image"):
        index = _get(config[key], RC1).json()
        platforms = {
            f"{m['platform']['os']}/{m['platform']['architecture']}" for m in index["manifests"]
        }
        assert {"linux/amd64", "linux/arm64"} <= platforms
    assert first.stdout.count("] build image 0.0.0-rc1") == 1
    assert "release summary:" in first.stdout
    assert RECORDED["digest"] in digests  # what release.yml would attest
    assert RECORDED["version"] == RC1


def test_each_kit_config_is_the_spec_stamped_with_its_registry(
    first: subprocess.CompletedProcess[str], pair: Pair
) -> None:
    config = pair.config()
    digest = _digest(config["hub_image"], RC1)
    assert digest is not None
    for name in settings.REGISTRY_NAMES:
        image, kit = config[f"{name}_image"], config[f"{name}_kit"]
        for tag, source, shape in ((RC1, SPEC, "current"), (RC1 + LEGACY, SPEC_LEGACY, "legacy")):
            manifest = _get(kit, tag).json()
            assert manifest["artifactType"] == kit_artifact.ARTIFACT_TYPE
            assert manifest["config"]["mediaType"] == kit_artifact.CONFIG_TYPE
            layers = [layer["mediaType"] for layer in manifest["layers"]]
            assert layers == [kit_artifact.LAYER_TYPE]
            assert kit_artifact.SOURCE in manifest["annotations"]
            served = _get(kit, manifest["config"]["digest"], "blobs").content
            assert served == stamp(source.read_text(), f"{image}:{RC1}", digest).encode()
            assert validate_text(served.decode()).shape == shape
    assert (
        set(RECORDED["kits"])
        == set(RECORDED["legacy_kits"])
        == {
            config["hub_kit"],
            config["ghcr_kit"],
        }
    )


def test_a_second_run_refuses_and_changes_nothing(
    first: subprocess.CompletedProcess[str], pair: Pair
) -> None:
    before = _state(pair)
    again = _publish(pair, RC1)
    assert again.returncode == 2, again.stdout + again.stderr
    assert "already published in every registry" in again.stderr
    assert "Traceback" not in again.stderr
    assert "image.build" not in again.stdout
    assert _state(pair) == before


def test_one_registry_pre_populated_heals_the_other_without_rebuilding(
    first: subprocess.CompletedProcess[str], pair: Pair
) -> None:
    config = pair.config()
    hub = parse_repository(config["hub_image"])
    digest = _digest(config["hub_image"], RC1)
    assert digest is not None
    Registries().copy(hub, digest, hub, RC2)  # a publish that reached only the Hub
    healed = _publish(pair, RC2)
    assert healed.returncode == 0, healed.stdout[-3000:] + healed.stderr
    assert "] build " not in healed.stdout
    assert "image.build" not in healed.stdout
    assert "copy-image" in healed.stdout
    assert _digest(config["ghcr_image"], RC2) == digest
    for kit in (config["hub_kit"], config["ghcr_kit"]):
        assert _digest(kit, RC2)
        assert _digest(kit, RC2 + LEGACY)


def test_a_registry_down_mid_run_stops_before_any_floating_tag_moves(
    first: subprocess.CompletedProcess[str], pair: Pair, tmp_path: Path
) -> None:
    lines: list[str] = []
    with contextlib.ExitStack() as down:
        ghcr = down.enter_context(local_registry(tmp_path / "ghcr-down"))
        config = settings.from_config(pair.config(ghcr=ghcr))
        hub = config.target("hub").image
        digest = _digest(config.target("hub").image_repo, RC1)
        assert digest is not None
        Registries().copy(hub, digest, hub, RELEASE)

        def progress(line: str) -> None:
            lines.append(line)
            if "] verify " in line and not stopped_registry:
                stopped_registry.append(ghcr)
                down.close()  # the GHCR stand-in stops answering

        stopped_registry: list[str] = []
        git = GitState(tag_present=True, clean=True, commit="rehearsal", remote="")
        with pytest.raises(ReleaseStopped) as stopped:
            publish(config, RELEASE, git=git, progress=progress)
    assert stopped.value.exit_code == 2
    assert "no floating tag moved" in str(stopped.value)
    assert any("move-floating" in line for line in lines)  # the plan had them
    assert not any("] moved" in line for line in lines)
    for repo in (config.target("hub").image_repo, config.target("hub").kit_repo):
        assert _digest(repo, "latest") is None
        assert _digest(repo, "0") is None
    summary = "\n".join(lines)
    assert "FAILED" in summary
    assert "not run" in summary
    assert stopped_registry
    assert json.dumps(lines).count("] build ") == 0
