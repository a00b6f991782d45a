"""`ensure_bases` run twice at once (two docker-lane workers each asking for the bases they
build on): each base is made once, and the second run waits for it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bandkit.image import bases
from bandkit.image.facts import host_arch


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
