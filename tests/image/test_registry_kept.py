"""The kept local registry (`invoke push` with no registry configured) when the task that
starts it is killed before it records it: `kill -9` while the registry came up left one
no record named, which `invoke image.registry --stop` could not stop and the next `push`
could not reuse (it started a second beside it).

A stand-in `docker-registry` (a small HTTP server answering `/v2/` on the address its
config names) takes the real one's place, so the test needs no Debian package; the real
registry runs in `tests/docker/test_build_push.py`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bandkit import processes
from bandkit.image import registry
from tests.support.wait import wait_for

FAKE_REGISTRY = textwrap.dedent(
    """\
    #!{python}
    import http.server, sys, yaml
    config = yaml.safe_load(open(sys.argv[2]))
    host, port = config["http"]["addr"].rsplit(":", 1)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/v2/" else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    http.server.HTTPServer((host, int(port)), Handler).serve_forever()
    """
)

# A task that starts the kept registry and is killed before it records it: the wait for
# the registry's first answer says so on stdout, then blocks (the test kills it there).
STARTER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from bandkit.image import registry
    def blocked(addr):
        print("started", flush=True)
        time.sleep(60)
        return False
    registry._answers = blocked
    registry.ensure_kept(Path(sys.argv[1]))
    """
)


@dataclass(frozen=True)
class Orphan:
    folder: Path  # the kept registry's folder
    pids: list[int]  # the registry serving it that no record names


@pytest.fixture
def orphan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Orphan]:
    """A kept registry whose starting task was killed before it recorded it; the stand-in
    `docker-registry` first on PATH, and no Docker daemon asked to drop refs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    binary = bin_dir / "docker-registry"
    binary.write_text(FAKE_REGISTRY.format(python=sys.executable))
    binary.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setattr(registry, "_untag", lambda addr: None)
    folder = tmp_path / "registry"
    try:
        starter = subprocess.Popen(
            [sys.executable, "-c", STARTER, str(folder)],
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
        assert starter.stdout is not None
        assert starter.stdout.readline() == b"started\n"
        wait_for(lambda: _serving(folder), timeout=20, what="the registry running")
        os.kill(starter.pid, signal.SIGKILL)
        starter.wait(10)
        assert not (folder / registry.STATE).exists()  # no record names it
        yield Orphan(folder, _serving(folder))
    finally:
        processes.terminate_tagged(registry._tag(folder), grace_s=2)


def _serving(folder: Path) -> list[int]:
    config = str(folder.absolute() / "config.yml").encode()
    return processes.scan(lambda p: config in p.cmdline.split(b"\0"))


def test_stop_finds_a_registry_its_killed_starter_never_recorded(orphan: Orphan) -> None:
    addr = registry.stop_kept(orphan.folder)
    assert addr is not None
    assert addr.startswith("127.0.0.1:")  # the address its config names
    assert [pid for pid in orphan.pids if processes.alive(pid)] == []
    assert _serving(orphan.folder) == []


def test_the_next_push_replaces_it_with_one_on_record(orphan: Orphan) -> None:
    kept = registry.ensure_kept(orphan.folder)
    assert kept.started
    assert _serving(orphan.folder) == [kept.pid]  # the orphan is gone, one registry serves
    assert kept.pid not in orphan.pids
    assert registry.kept_status(orphan.folder) == registry.Kept(kept.addr, kept.pid, False)
    assert registry.stop_kept(orphan.folder) == kept.addr
    assert _serving(orphan.folder) == []
