"""The credential proxy's sidecar image for real: `fleet.build-proxy` builds it on the kit
image (a second run builds nothing), and a container of it, as uid 1000 with a read-only
root, every capability dropped and its key and token as mounted files, swaps the agent's
placeholder for the key on the platform's agent API only: a request without the token,
or off the API, is refused before the upstream sees it; the key never flows back, and is
in no argument, no log and nothing `docker inspect` shows."""

from __future__ import annotations

import http.server
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bandkit.image import proxy
from tests import commands
from tests.support.wait import wait_for

pytestmark = pytest.mark.docker
REPO = Path(__file__).resolve().parents[2]
KEY = "band_sidecar_canary_" + secrets.token_hex(12)


class _Upstream(http.server.ThreadingHTTPServer):
    seen: list[dict[str, str]]


class _Echo(http.server.BaseHTTPRequestHandler):
    """Records each request's path and key header; answers with the key in the body."""

    server: _Upstream

    def do_GET(self) -> None:
        self.server.seen.append({"path": self.path, "key": self.headers.get("X-API-Key", "")})
        body = json.dumps({"you_sent": self.headers.get("X-API-Key", "")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def upstream() -> Iterator[_Upstream]:
    server = _Upstream(("127.0.0.1", 0), _Echo)
    server.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _answers(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_the_sidecar_image_swaps_the_key_on_the_agent_api_only(
    kit_image: str, upstream: _Upstream, tmp_path: Path
) -> None:
    argv = [sys.executable, "-m", "invoke", "fleet.build-proxy", "--base", kit_image]
    runs = [
        subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
        for _ in range(2)
    ]
    for done in runs:
        assert done.returncode == 0, done.stdout + done.stderr
    image = runs[0].stdout.split()[-1]
    assert image.startswith(f"{proxy.REPOSITORY}:")
    assert runs[1].stdout.startswith("fleet.build-proxy: up to date:"), runs[1].stdout
    token = secrets.token_urlsafe(24)
    for name, value in (("agent-key", KEY), ("token", token)):
        (tmp_path / name).write_text(value + "\n")
        os.chown(tmp_path / name, 1000, 1000)
        (tmp_path / name).chmod(0o400)
    port = _free_port()
    upstream_url = f"http://127.0.0.1:{upstream.server_address[1]}"
    name = f"bandkit-sidecar-test-{secrets.token_hex(4)}"
    run = ["docker", "run", "--detach", "--name", name, "--network", "host", "--read-only"]
    run += ["--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--tmpfs", "/tmp"]
    run += ["--volume", f"{tmp_path / 'agent-key'}:/run/band-key/agent-key:ro"]
    run += ["--volume", f"{tmp_path / 'token'}:/run/band-token/token:ro", image]
    run += ["--upstream", upstream_url, "--listen", f"127.0.0.1:{port}"]
    run += ["--key-file", "/run/band-key/agent-key", "--token-file", "/run/band-token/token"]
    subprocess.run(run, capture_output=True, text=True, timeout=60, check=True)
    try:
        wait_for(lambda: _answers(port), timeout=30, what="the sidecar listening")
        base = f"http://127.0.0.1:{port}"
        placeholder = {"X-API-Key": "proxy-managed"}
        swapped = httpx.get(f"{base}/{token}/api/v1/agent/me", headers=placeholder, timeout=10)
        assert swapped.status_code == 200, swapped.text
        assert upstream.seen == [{"path": "/api/v1/agent/me", "key": KEY}]
        assert KEY not in swapped.text  # masked on the way back
        assert swapped.json()["you_sent"] == "*" * len(KEY)
        for path in ("/api/v1/agent/me", f"/{token}/api/v1/humans", f"/{token}/"):
            refused = httpx.get(f"{base}{path}", headers=placeholder, timeout=10)
            assert refused.status_code == 403, (path, refused.status_code)
        assert len(upstream.seen) == 1, "a refused request reached the upstream"
        inspect = subprocess.run(
            ["docker", "inspect", name], capture_output=True, text=True, timeout=30, check=True
        )
        (container,) = json.loads(inspect.stdout)
        assert container["Config"]["User"] == "1000:1000"
        logs = subprocess.run(
            ["docker", "logs", name], capture_output=True, text=True, timeout=30, check=True
        )
        for text in (inspect.stdout, logs.stdout + logs.stderr):
            assert KEY not in text
            assert token not in text
    finally:
        subprocess.run(["docker", "rm", "--force", name], capture_output=True, timeout=60)


def test_the_sidecar_refuses_an_unreadable_key_file_by_name(kit_image: str) -> None:
    image = proxy.build(base=kit_image, progress=lambda _line: None).tag
    argv = ["docker", "run", "--rm", "--network", "none", "--read-only", "--cap-drop", "ALL"]
    argv += [image, "--upstream", "https://platform.example", "--key-file", "/run/none/key"]
    done = commands.run([*argv, "--token-file", "/run/none/token"], timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "cannot read the key file /run/none/key" in done.stderr
    assert "Traceback" not in done.stderr
