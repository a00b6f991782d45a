"""The Dockerfile, entrypoint and build context against the facts they must agree with."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from bandkit.dockercli import ImageError
from bandkit.image import build as image_build
from bandkit.image import facts as image_facts
from bandkit.image.bases import python_tag, uv_tag
from bandkit.runtimes.docker.identity import GID_ENV, GID_LABEL
from launcher.constants import (
    AGENT_HOME,
    AGENT_UID,
    AGENT_USER,
    DEFAULT_SDK_HOME,
    DEFAULT_SDK_PYTHON,
    DEFAULT_SDK_UV,
)

KIT = image_facts.KIT_DIR
PIN = re.compile(r"^[a-z0-9./-]+:[\w.-]+@sha256:[0-9a-f]{64}$")


def dockerfile() -> str:
    return image_facts.DOCKERFILE.read_text(encoding="utf-8")


def runtime_stage() -> str:
    return dockerfile().split(" AS runtime", 1)[1]


def test_base_pins_are_single_line_tag_and_digest_args() -> None:
    args = image_facts.dockerfile_args()
    for name in ("PYTHON_BASE_IMAGE", "UV_IMAGE"):
        assert PIN.match(args[name]), args[name]
        assert re.search(rf"^ARG {name}=\S+$", dockerfile(), re.MULTILINE)
    assert args["BAND_SDK_HOME"] == DEFAULT_SDK_HOME
    assert args["SDK_EXTRA"] == ""


def test_user_home_and_sdk_paths_match_the_launcher_constants() -> None:
    text = dockerfile()
    assert f"groupadd --gid {AGENT_UID} {AGENT_USER}" in text
    assert f"useradd --uid {AGENT_UID} --gid {AGENT_UID}" in text
    assert f"--home-dir {AGENT_HOME}" in text
    assert f"ENV HOME={AGENT_HOME}" in text
    home = DEFAULT_SDK_HOME
    assert f"{home}/venv/bin/python" == DEFAULT_SDK_PYTHON
    assert f"{home}/bin/uv" == DEFAULT_SDK_UV
    assert "ENV BAND_SDK_PYTHON=${BAND_SDK_HOME}/venv/bin/python" in text
    assert "ENV BAND_SDK_UV=${BAND_SDK_HOME}/bin/uv" in text
    entrypoint = (KIT / "entrypoint.sh").read_text()
    assert f'--reuid={AGENT_UID} --regid="$agent_gid"' in entrypoint
    assert f'agent_gid="${{{GID_ENV}:-{AGENT_UID}}}"' in entrypoint  # the image's own group


def test_the_image_says_its_entrypoint_takes_the_boxs_gid() -> None:
    """The docker runtime refuses an image without this label (docker.identity)."""
    assert f'LABEL {GID_LABEL}="1"' in runtime_stage()


def test_size_and_speed_rules() -> None:
    text = dockerfile()
    assert "ENV UV_COMPILE_BYTECODE=1" in text
    assert "ENV UV_PROJECT_ENVIRONMENT=${BAND_SDK_HOME}/venv" in text
    assert "--no-editable" in text
    assert "chmod -R" not in runtime_stage()  # modes are set in the builder; COPY carries them
    assert "rm -rf /var/lib/apt/lists/*" in runtime_stage()
    assert "update-ca-certificates" not in (KIT / "entrypoint.sh").read_text()
    assert "build-ca" not in runtime_stage()  # the build CA reaches the builder only


def test_every_env_has_a_reason_comment() -> None:
    lines = dockerfile().splitlines()
    for index, line in enumerate(lines):
        if line.startswith("ENV "):
            above = lines[index - 1]
            assert above.startswith("#") or lines[index - 1].startswith("ENV "), line


def test_dockerignore_denies_by_default(repo_root: Path) -> None:
    rules = [
        line
        for line in (repo_root / ".dockerignore").read_text().splitlines()
        if line and not line.startswith("#")
    ]
    assert rules[0] == "*"
    allowed = {rule[1:] for rule in rules if rule.startswith("!")}
    assert allowed == {
        "launcher/",
        "docker/band_python_kit/sdk/pyproject.toml",
        "docker/band_python_kit/sdk/uv.lock",
        "docker/band_python_kit/entrypoint.sh",
        "docker/band_python_kit/build-ca/",
        # Dockerfile.cli's codex pin and its fetcher (the kit image itself never copies them)
        "docker/band_python_kit/codex/package.json",
        "docker/band_python_kit/codex/package-lock.json",
        "bandkit/demo/codex_fetch.py",
    }
    copied = re.findall(r"^COPY (?!--from)(\S+)", dockerfile(), re.MULTILINE)
    for source in copied:
        assert any(source.startswith(a.rstrip("/")) for a in allowed), source


def test_entrypoint_is_short_strict_and_shellcheck_clean() -> None:
    script = (KIT / "entrypoint.sh").read_text()
    assert "set -euo pipefail" in script
    logic = [
        line for line in script.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]
    assert len(logic) <= 20, len(logic)
    assert re.search(r"^exec setpriv .*\\$", script, re.MULTILINE)


def test_sdk_project_pins_band_sdk_and_ships_the_launcher() -> None:
    text = (image_facts.SDK_PROJECT / "pyproject.toml").read_text()
    assert '"band-sdk==6.0.1"' in text
    assert '"../../../launcher" = "launcher"' in text
    assert "[tool.uv.sources]" not in text  # nothing can leak a local or git source in


def test_sdk_lock_is_current() -> None:
    proc = subprocess.run(
        ["uv", "lock", "--check", "--directory", str(image_facts.SDK_PROJECT)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr


def test_local_build_plan_passes_the_local_bases() -> None:
    request = image_build.BuildRequest(base="local", sdk_extra="anthropic")
    argv = image_build.docker_build_argv(request, "linux/amd64")
    assert argv[:5] == [
        "build",
        "--file",
        str(image_facts.DOCKERFILE),
        "--tag",
        "band-python-kit:local",
    ]
    assert f"PYTHON_BASE_IMAGE={python_tag('amd64')}" in argv
    assert f"UV_IMAGE={uv_tag('amd64')}" in argv
    assert "SDK_EXTRA=anthropic" in argv
    assert argv[-1] == str(image_facts.REPO_ROOT)


def test_official_build_plan_keeps_the_dockerfile_pins() -> None:
    argv = image_build.docker_build_argv(image_build.BuildRequest(), "linux/amd64")
    assert not any(a.startswith(("PYTHON_BASE_IMAGE=", "UV_IMAGE=")) for a in argv)


def test_multi_platform_builds_get_per_arch_tags() -> None:
    request = image_build.BuildRequest(platforms=("linux/amd64", "linux/arm64"), tag="kit:1")
    assert [image_build.tag_for(request, p) for p in request.platforms] == [
        "kit:1-amd64",
        "kit:1-arm64",
    ]
    single = image_build.BuildRequest(platforms=("linux/arm64",), tag="kit:1")
    assert image_build.tag_for(single, "linux/arm64") == "kit:1"


def test_unknown_platform_is_refused() -> None:
    with pytest.raises(ImageError, match="unsupported platform 'linux/s390x'"):
        image_build.arch_of("linux/s390x")
