"""`kit.bump-bases`: only the single ARG pin lines move; offline it says so, changing nothing."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from bandkit.image.facts import DOCKERFILE, REPO_ROOT
from bandkit.kit import bump_bases
from bandkit.kit.bump_bases import BumpError

NEW = "sha256:" + "e" * 64


def copy_of_the_dockerfile(tmp_path: Path) -> Path:
    target = tmp_path / "Dockerfile"
    target.write_bytes(DOCKERFILE.read_bytes())
    return target


def test_every_pin_is_re_pinned_and_no_other_byte_moves(tmp_path: Path) -> None:
    path = copy_of_the_dockerfile(tmp_path)
    before = path.read_text()
    asked: list[tuple[str, str]] = []

    def resolve(repository: str, tag: str) -> str:
        asked.append((repository, tag))
        return NEW

    changes = bump_bases.bump([path], resolve)
    assert [c.name for c in changes] == ["PYTHON_BASE_IMAGE", "UV_IMAGE"]
    assert asked == [("python", "3.12.13-slim-trixie"), ("ghcr.io/astral-sh/uv", "0.9.13")]
    after = path.read_text()
    changed = [
        (a, b) for a, b in zip(before.splitlines(), after.splitlines(), strict=True) if a != b
    ]
    assert [b for _, b in changed] == [
        f"ARG PYTHON_BASE_IMAGE=python:3.12.13-slim-trixie@{NEW}",
        f"ARG UV_IMAGE=ghcr.io/astral-sh/uv:0.9.13@{NEW}",
    ]
    assert bump_bases.bump([path], resolve)
    assert path.read_text() == after  # idempotent


def test_a_check_writes_nothing(tmp_path: Path) -> None:
    path = copy_of_the_dockerfile(tmp_path)
    before = path.read_bytes()
    changes = bump_bases.bump([path], lambda _r, _t: NEW, write=False)
    assert all(c.changed for c in changes)
    assert path.read_bytes() == before


def test_a_failed_lookup_leaves_every_file_alone(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    paths = [copy_of_the_dockerfile(first), copy_of_the_dockerfile(second)]
    calls: list[str] = []

    def resolve(repository: str, tag: str) -> str:
        calls.append(repository)
        if len(calls) == 3:
            raise BumpError("offline")
        return NEW

    with pytest.raises(BumpError):
        bump_bases.bump(paths, resolve)
    assert all(p.read_bytes() == DOCKERFILE.read_bytes() for p in paths)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("ARG UV_IMAGE=ghcr.io/astral-sh/uv:0.9.13@sha256:" + "a" * 64 + "\n", "found 0"),
        ("ARG PYTHON_BASE_IMAGE=python:3.12\nARG UV_IMAGE=uv:1@sha256:" + "a" * 64, "not pinned"),
    ],
)
def test_a_dockerfile_without_single_pins_is_refused(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text(text)
    with pytest.raises(BumpError, match=problem):
        bump_bases.bump([path], lambda _r, _t: NEW)


def test_docker_hub_short_names_resolve_to_the_library() -> None:
    assert bump_bases.registry_of("python") == ("registry-1.docker.io", "library/python")
    assert bump_bases.registry_of("docker.io/bandhq/kit") == ("registry-1.docker.io", "bandhq/kit")
    assert bump_bases.registry_of("ghcr.io/astral-sh/uv") == ("ghcr.io", "astral-sh/uv")


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_offline_it_says_so() -> None:
    with pytest.raises(BumpError, match="needs the network, nothing was changed"):
        bump_bases.resolve_online(f"127.0.0.1:{_closed_port()}/astral-sh/uv", "0.9.13")


def test_the_task_offline_exits_1_with_one_line_and_the_dockerfile_unchanged(
    tmp_path: Path,
) -> None:
    path = tmp_path / "Dockerfile"
    port = _closed_port()
    path.write_text(
        f"ARG PYTHON_BASE_IMAGE=127.0.0.1:{port}/python:3.12@sha256:{'a' * 64}\n"
        f"ARG UV_IMAGE=127.0.0.1:{port}/uv:0.9.13@sha256:{'b' * 64}\n"
    )
    before = path.read_bytes()
    proc = subprocess.run(
        [sys.executable, "-m", "invoke", "kit.bump-bases", "--dockerfile", str(path)],
        cwd=REPO_ROOT, capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1
    assert proc.stderr.startswith("kit.bump-bases: offline? cannot reach 127.0.0.1:")
    assert "Traceback" not in proc.stderr
    assert path.read_bytes() == before
