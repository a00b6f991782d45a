"""The CLI image's facts hold together (no daemon needed): one codex pin, a lock that
matches it, a Dockerfile.cli built on the kit image, the image each brains runs, and the
proof that refuses an image whose codex is not the pinned one."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from bandkit.demo import DemoError, cli_image, preflight
from bandkit.dockercli import ImageError
from bandkit.image import build as image_build
from bandkit.image.facts import LOCAL_TAG, REPO_ROOT, dockerfile_args
from bandkit.runtimes.base import RuntimeName

LOCK = cli_image.CODEX_PROJECT / "package-lock.json"


def test_the_lock_pins_exactly_the_version_package_json_names() -> None:
    version = cli_image.codex_version()
    assert re.fullmatch(r"\d+\.\d+\.\d+", version)
    lock = json.loads(LOCK.read_text())
    assert lock["lockfileVersion"] == 3
    assert lock["packages"][""]["dependencies"] == {cli_image.CODEX_PACKAGE: version}
    packages = lock["packages"]
    assert packages["node_modules/@openai/codex"]["version"] == version
    platforms = {k: v for k, v in packages.items() if k.startswith("node_modules/@openai/codex-")}
    assert "node_modules/@openai/codex-linux-x64" in platforms
    assert "node_modules/@openai/codex-linux-arm64" in platforms
    for path, entry in packages.items():
        assert not entry.get("hasInstallScript")  # --ignore-scripts loses nothing
        if path:  # every package: this codex, integrity-checked by codex_fetch
            assert entry["version"].startswith(version)
            assert entry["integrity"].startswith("sha512-")


def test_a_range_instead_of_a_pin_is_refused(tmp_path: Path) -> None:
    (tmp_path / "package.json").write_text(json.dumps({"dependencies": {"@openai/codex": "^0"}}))
    with pytest.raises(DemoError, match="must pin @openai/codex to one exact version"):
        cli_image.codex_version.__wrapped__(tmp_path)


def test_dockerfile_cli_builds_on_the_kit_image_from_the_lock() -> None:
    text = cli_image.CLI_DOCKERFILE.read_text()
    args = dockerfile_args(cli_image.CLI_DOCKERFILE)
    assert args["KIT_IMAGE"] == LOCAL_TAG
    assert args["PYTHON_BASE_IMAGE"] == dockerfile_args()["PYTHON_BASE_IMAGE"]  # one pin
    assert "python3 codex_fetch.py /src/codex" in text
    assert "package-lock.json" in text
    ignore = (REPO_ROOT / ".dockerignore").read_text().splitlines()
    for name in ("codex/package.json", "codex/package-lock.json"):
        assert f"!docker/band_python_kit/{name}" in ignore  # in the build context
    assert "!bandkit/demo/codex_fetch.py" in ignore
    assert "apt-get" not in text  # no Debian node or npm in any stage


def test_the_cli_build_request_names_dockerfile_cli_and_the_kit_tag() -> None:
    request = cli_image.cli_request(kit_tag="band-python-kit:other", base="local/debian:x")
    argv = image_build.docker_build_argv(request, "linux/amd64")
    assert "PYTHON_BASE_IMAGE=local/debian:x" in argv
    assert argv[argv.index("--file") + 1] == str(cli_image.CLI_DOCKERFILE)
    assert argv[argv.index("--tag") + 1] == cli_image.CLI_TAG
    assert "KIT_IMAGE=band-python-kit:other" in argv
    plain = image_build.docker_build_argv(image_build.BuildRequest(), "linux/amd64")
    assert plain[plain.index("--file") + 1].endswith("band_python_kit/Dockerfile")


@pytest.mark.parametrize(
    ("brains", "runtime", "image"),
    [
        ("scripted", "docker", LOCAL_TAG),
        ("stub", "docker", cli_image.CLI_TAG),
        ("real", "docker", cli_image.CLI_TAG),
        ("stub", "local", None),
        ("stub", "sbx", None),
    ],
)
def test_the_docker_sandboxes_of_llm_brains_run_the_cli_image(
    brains: str, runtime: str, image: str | None
) -> None:
    assert cli_image.sandbox_image(brains, runtime) == image


def test_unknown_brains_are_refused() -> None:
    with pytest.raises(DemoError, match="--brains must be one of scripted, stub, real"):
        cli_image.image_for("llm")


def test_a_missing_cli_image_names_demo_build(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_image, "image_exists", lambda ref: False)
    with pytest.raises(DemoError) as caught:
        cli_image.require_image("stub")
    assert str(caught.value) == (
        f"the docker runtime needs {cli_image.CLI_TAG} for --brains stub: build it with "
        "`uv run invoke demo.build --brains stub`, or pass --runtime local"
    )


def test_auto_falls_back_to_local_without_the_cli_image(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(preflight, "resolve_name", lambda choice: RuntimeName.DOCKER)
    seen: list[str] = []

    def has_image(ref: str) -> bool:
        seen.append(ref)
        return False

    name, notes = preflight.choose_runtime("auto", has_image=has_image, image=cli_image.CLI_TAG)
    assert (name, seen) == (RuntimeName.LOCAL, [cli_image.CLI_TAG])
    assert f"the image {cli_image.CLI_TAG} is not built (`uv run invoke demo.build`)" in notes[0]


def _docker_answering(monkeypatch: pytest.MonkeyPatch, code: int, out: str, err: str = "") -> None:
    def fake(argv: list[str], timeout_s: float, **_: object) -> subprocess.CompletedProcess[str]:
        assert argv[:4] == ["run", "--rm", "--network", "none"]
        assert argv[-2:] == ["codex", "--version"]
        return subprocess.CompletedProcess(argv, code, out, err)

    monkeypatch.setattr(cli_image, "docker", fake)


def test_the_proof_accepts_only_the_pinned_codex(monkeypatch: pytest.MonkeyPatch) -> None:
    want = f"codex-cli {cli_image.codex_version()}"
    _docker_answering(monkeypatch, 0, want + "\n")
    assert cli_image.prove("img") == want
    _docker_answering(monkeypatch, 0, "codex-cli 0.0.1\n")
    with pytest.raises(DemoError, match=f"did not print '{want}' \\(exit 0\\)"):
        cli_image.prove("img")
    _docker_answering(monkeypatch, 127, "", "exec: codex: not found")
    with pytest.raises(DemoError, match=r"(?s)exit 127.*codex: not found.*--no-cache"):
        cli_image.prove("img")


def test_a_hung_proof_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def hang(argv: list[str], timeout_s: float, **_: object) -> subprocess.CompletedProcess[str]:
        raise ImageError(f"docker run: `docker {' '.join(argv)}` timed out after {timeout_s:g}s")

    monkeypatch.setattr(cli_image, "docker", hang)
    with pytest.raises(DemoError, match="timed out after 120s; check the daemon"):
        cli_image.prove("img")
