"""`python -m bandkit.bench`: `--help` lists every benchmark with one line and exits 0; an
unknown name or option is a clear error (exit 2, no traceback); `--quick` and
`BANDKIT_BENCH_QUICK` choose the small sizes; `BANDKIT_BENCH_DOCKER=0` means no Docker."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from bandkit import bench
from bandkit.bench import BENCHES, QUICK_ENV, __main__, docker_ok, sized
from tests.commands import REPO


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bandkit.bench", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=15,
        check=False,
    )


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_lists_every_benchmark_with_one_line(flag: str) -> None:
    done = _bench(flag)
    assert done.returncode == 0, done.stderr
    listed = {line.split()[0]: line for line in done.stdout.splitlines() if line.startswith("  ")}
    assert set(BENCHES) <= set(listed)
    for name, entry in BENCHES.items():
        assert entry.summary in listed[name]
    assert "--quick" in listed
    assert done.stdout.startswith("usage: python -m bandkit.bench")


def test_an_unknown_benchmark_or_option_is_a_clear_error() -> None:
    for args in (["--bogus"], ["nosuch"], ["proxy", "nosuch"]):
        done = _bench(*args)
        assert done.returncode == 2, args
        assert "unknown benchmark(s) or option(s)" in done.stderr
        assert "--help" in done.stderr
        assert "Traceback" not in done.stderr


def test_every_registered_benchmark_has_a_module_with_run_and_a_lane() -> None:
    for name, entry in BENCHES.items():
        module = importlib.import_module(f"bandkit.bench.{entry.module}")
        assert callable(module.run), name
        assert entry.lanes, name
        assert set(entry.lanes) <= {"e2e", "docker", "cluster"}, name


def test_quick_and_docker_switches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(QUICK_ENV, raising=False)
    assert sized(200, 5) == 200
    for value, small in (("1", True), ("yes", True), ("0", False), ("", False)):
        monkeypatch.setenv(QUICK_ENV, value)
        assert sized(200, 5) == (5 if small else 200), value
    monkeypatch.setenv(bench.DOCKER_ENV, "0")
    assert docker_ok() is False


def test_quick_is_set_before_a_benchmark_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(QUICK_ENV, raising=False)
    seen: list[bool] = []

    class Fake:
        @staticmethod
        def run() -> list[str]:
            seen.append(bench.quick())
            return ["figure"]

    monkeypatch.setattr(__main__.importlib, "import_module", lambda _name: Fake)
    assert __main__.main(["proxy", "--quick"]) == 0
    assert seen == [True]
