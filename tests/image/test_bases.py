"""`ensure_bases` run twice at once (two docker-lane workers each asking for the bases they
build on): each base is made once, and the second run waits for it. A debootstrap that
fails or passes its deadline (a fake one on PATH): its whole session is killed, what it
left mounted in its chroot is unmounted, and its scratch directory goes without a delete
through that mount into the host's files."""

from __future__ import annotations

import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bandkit.dockercli import ImageError
from bandkit.image import bases
from bandkit.image.facts import host_arch, official_suite


def test_a_second_run_waits_for_the_first_and_makes_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    images: set[str] = set()
    made: list[str] = []
    started, release = threading.Event(), threading.Event()

    def make(base: bases.Base, _progress: bases.Progress) -> None:
        made.append(base.tag)
        started.set()
        assert release.wait(10)
        images.add(base.tag)

    monkeypatch.setattr(bases, "lock_dir", lambda: tmp_path)
    monkeypatch.setattr(bases, "image_exists", lambda tag: tag in images)
    monkeypatch.setattr(bases, "_make_python", make)
    monkeypatch.setattr(bases, "_make_uv", lambda base, _p: images.add(base.tag))
    arch = host_arch()
    second_lines: list[str] = []
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(bases.ensure_bases, (arch,), lambda _line: None)
        assert started.wait(10)
        python, uv = bases.python_tag(arch), bases.uv_tag(arch)
        _until(lambda: uv in images)
        second = pool.submit(bases.ensure_bases, (arch,), second_lines.append)
        _until(lambda: any("waiting for it" in line for line in second_lines))
        assert not second.done()
        release.set()
        assert first.result(10) == [f"{python}: made", f"{uv}: made"]
        assert second.result(10) == [f"{python}: made by another run", f"{uv}: present"]
    assert made == [python]
    assert second_lines[0].startswith(f"image.bases: another run is making {python}")


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.02)


FAKE_DEBOOTSTRAP = """#!/bin/sh
# debootstrap as a killed or failed one leaves things: a child still running, and a
# directory of the host's mounted inside the chroot (as its proc, sys or dev would be).
rootfs=$(eval echo "\\${$(($# - 1))}")
mkdir -p "$rootfs/dev"
if [ -n "$FAKE_BIND" ]; then mount --bind "$FAKE_BIND" "$rootfs/dev"; fi
if [ -n "$FAKE_FAIL" ]; then echo "E: Couldn't download packages"; exit 1; fi
sleep 300 &
echo $! > "$FAKE_CHILD"
wait
"""


@pytest.fixture
def fake_debootstrap(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A debootstrap on PATH that leaves a child running (its pid in the returned file);
    the suite's script present; scratch directories made under tmp_path."""
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "debootstrap").write_text(FAKE_DEBOOTSTRAP)
    (tools / "debootstrap").chmod(0o755)
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / official_suite()).touch()
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    child = tmp_path / "child.pid"
    monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_CHILD", str(child))
    monkeypatch.setattr(bases, "DEBOOTSTRAP_SCRIPTS", scripts)
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    return child


def _gone(pid_file: Path) -> bool:
    return not Path(f"/proc/{int(pid_file.read_text())}").exists()


def test_a_debootstrap_past_its_deadline_is_killed_with_what_it_runs(
    fake_debootstrap: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(bases, "DEBOOTSTRAP_TIMEOUT_S", 1.0)
    base = bases.Base("python", "arm64", "local/debian-python:test-arm64")
    with pytest.raises(ImageError, match=r"debootstrap arm64 did not finish within 1s"):
        bases._make_python(base, lambda _line: None)
    _until(lambda: _gone(fake_debootstrap))  # its child too, not debootstrap alone
    assert list((tmp_path / "scratch").iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts need root")
def test_a_mount_left_in_the_chroot_is_unmounted_never_deleted_through(
    fake_debootstrap: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    host = tmp_path / "host-dev"  # stands for the host's /dev, bound into the chroot
    host.mkdir()
    (host / "null").write_text("the host's")
    monkeypatch.setenv("FAKE_BIND", str(host))
    monkeypatch.setenv("FAKE_FAIL", "1")
    base = bases.Base("python", "arm64", "local/debian-python:test-arm64")
    try:
        with pytest.raises(ImageError, match=r"(?s)debootstrap arm64 failed:.*download"):
            bases._make_python(base, lambda _line: None)
        assert (host / "null").read_text() == "the host's"
        assert list((tmp_path / "scratch").iterdir()) == []
    finally:
        for point in bases._mounts_under(tmp_path):
            subprocess.run(["umount", "--lazy", point], check=False)
