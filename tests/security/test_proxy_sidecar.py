"""The sidecar entry point of the credential proxy (`keyproxy.sidecar`), as the sidecar
image runs it: the zipapp alone (`python -I`), its key and token from files. A bad file
or argument exits 2 naming it, never its content; with good ones it serves the route with
the token checked and the key swapped in (the image's own test runs it in Docker)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from bandkit.proxies.keyproxy import sidecar, zipapp
from bandkit.runtimes.boxnet import API_PATHS, REST_ENV
from launcher.constants import DEFAULT_WS_URL
from tests.support.wait import wait_for

KEY = "band_sidecar_unit_canary_0123456789"
TOKEN = "t" * 32


def _app(tmp_path: Path) -> Path:
    app = tmp_path / "credential-proxy.pyz"
    app.write_bytes(zipapp.build("sidecar"))
    return app


def _run(app: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-I", "-P", str(app), *args],
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )


def test_its_default_paths_are_the_band_agent_api() -> None:
    assert sidecar.BAND_PATHS[0] == API_PATHS[REST_ENV][0]
    assert DEFAULT_WS_URL.endswith(sidecar.BAND_PATHS[1])


@pytest.mark.parametrize(
    ("key", "token", "says"),
    [
        (None, TOKEN, "cannot read the key file"),
        ("", TOKEN, "must hold one non-empty line"),
        (f"{KEY}\nsecond line\n", TOKEN, "must hold one non-empty line"),
        (KEY, "short", "the token must be at least"),
    ],
)
def test_a_bad_key_or_token_file_exits_2_naming_it_not_its_content(
    tmp_path: Path, key: str | None, token: str, says: str
) -> None:
    if key is not None:
        (tmp_path / "key").write_text(key)
    (tmp_path / "token").write_text(token)
    done = _run(
        _app(tmp_path),
        *("--upstream", "https://platform.example", "--key-file", str(tmp_path / "key")),
        *("--token-file", str(tmp_path / "token"), "--state-dir", str(tmp_path / "state")),
    )
    assert done.returncode == 2, done.stderr
    assert says in done.stderr
    assert "Traceback" not in done.stderr
    assert KEY not in done.stderr
    assert "second line" not in done.stderr


def test_a_plain_http_upstream_off_loopback_is_refused(tmp_path: Path) -> None:
    (tmp_path / "key").write_text(KEY)
    (tmp_path / "token").write_text(TOKEN)
    done = _run(
        _app(tmp_path),
        *("--upstream", "http://platform.example", "--key-file", str(tmp_path / "key")),
        *("--token-file", str(tmp_path / "token"), "--state-dir", str(tmp_path / "state")),
    )
    assert done.returncode == 2
    assert "refusing plain http:// upstream platform.example" in done.stderr


def test_it_serves_with_the_token_checked(tmp_path: Path) -> None:
    (tmp_path / "key").write_text(KEY + "\n")
    (tmp_path / "token").write_text(TOKEN + "\n")
    state = tmp_path / "state"
    argv = [sys.executable, "-I", "-P", str(_app(tmp_path)), "--upstream", "http://127.0.0.1:9"]
    argv += ["--key-file", str(tmp_path / "key"), "--token-file", str(tmp_path / "token")]
    proc = subprocess.Popen(
        [*argv, "--listen", "127.0.0.1:0", "--state-dir", str(state)],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ports = state / "ports.json"
        wait_for(ports.exists, timeout=15, what="the sidecar's ports file")
        (port,) = json.loads(ports.read_text())["ports"]
        refused = httpx.get(f"http://127.0.0.1:{port}/api/v1/agent/me", timeout=5)
        assert refused.status_code == 403
        assert oct(state.stat().st_mode & 0o777) == "0o700"
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err
    assert KEY not in err
    assert TOKEN not in err
