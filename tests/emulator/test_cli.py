"""`python -m bandkit.emulator` as people run it: help, banner, errors, Ctrl-C, --tls."""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from websockets.asyncio.client import connect

from tests.emulator.support import REPO_ROOT, USER_KEY, EmulatorProcess


def run_cli(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bandkit.emulator", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO_ROOT,
        check=False,
    )


def test_help_lists_every_option() -> None:
    result = run_cli("--help")
    assert result.returncode == 0
    for option in (
        "--host",
        "--port",
        "--user-key",
        "--user-key-file",
        "--state-file",
        "--tls",
        "--allow-host",
        "--max-delivery-attempts",
    ):
        assert option in result.stdout


@pytest.mark.parametrize(
    ("args", "phase"),
    [
        (["--port", "70000"], "[config]"),
        (["--user-key-file", "/nonexistent/key"], "[config]"),
        (["--allow-host", "gateway:notaport"], "[config]"),
        (["--max-delivery-attempts", "0"], "[config]"),
    ],
)
def test_bad_options_fail_cleanly(args: list[str], phase: str) -> None:
    result = run_cli(*args)
    assert result.returncode == 1
    assert phase in result.stderr
    assert "Traceback" not in result.stderr


def test_busy_port_is_a_bind_error() -> None:
    with socket.create_server(("127.0.0.1", 0)) as busy:
        port = busy.getsockname()[1]
        result = run_cli("--port", str(port), "--user-key", USER_KEY)
    assert result.returncode == 1
    assert "[bind]" in result.stderr
    assert "pick another --port" in result.stderr
    assert "Traceback" not in result.stderr


def test_corrupt_state_file_is_a_state_error(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    state.write_text("{")
    result = run_cli("--state-file", str(state))
    assert result.returncode == 1
    assert "[state]" in result.stderr
    assert "Traceback" not in result.stderr


async def test_banner_then_clean_ctrl_c(tmp_path: Path) -> None:
    emulator = await EmulatorProcess([], tmp_path / "emu.log").start()
    assert emulator.banner[0].startswith("http://127.0.0.1:")
    assert emulator.banner[1] == f"ws://{emulator.rest_url.split('://')[1]}/api/v1/socket/websocket"
    key_line = emulator.banner[2]
    assert key_line.startswith("user key: band_u_")
    generated = key_line.removeprefix("user key: ")
    async with httpx.AsyncClient(base_url=emulator.rest_url) as client:
        ok = await client.get("/_emulator/health", headers={"x-api-key": generated})
        assert ok.status_code == 200
    assert await emulator.stop(signal.SIGINT) == 0
    assert "Traceback" not in emulator.log()


async def test_key_from_file_is_never_printed(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(USER_KEY + "\n")
    emulator = await EmulatorProcess(
        ["--user-key-file", str(key_file)], tmp_path / "emu.log"
    ).start()
    assert await emulator.stop() == 0
    assert USER_KEY not in "\n".join(emulator.banner)
    assert USER_KEY not in emulator.log()


async def test_tls_serves_https_and_wss_trusted_by_the_printed_ca(tmp_path: Path) -> None:
    tls_dir = tmp_path / "tls"
    emulator = await EmulatorProcess(
        [
            "--tls",
            "--tls-dir",
            str(tls_dir),
            "--tls-name",
            "host.docker.internal",
            "--user-key",
            USER_KEY,
        ],
        tmp_path / "emu.log",
    ).start()
    try:
        assert emulator.rest_url.startswith("https://")
        assert emulator.ws_url.startswith("wss://")
        ca_line = next(line for line in emulator.banner if line.startswith("CA certificate:"))
        ca = tls_dir / "ca.pem"
        assert str(ca) in ca_line
        context = ssl.create_default_context(cafile=str(ca))
        async with httpx.AsyncClient(base_url=emulator.rest_url, verify=context) as client:
            health = await client.get("/_emulator/health", headers={"x-api-key": USER_KEY})
            assert health.status_code == 200
        async with connect(
            f"{emulator.ws_url}?vsn=2.0.0", additional_headers={"x-api-key": USER_KEY}, ssl=context
        ) as ws:
            await ws.send(json.dumps([None, "1", "phoenix", "heartbeat", {}]))
            assert json.loads(await ws.recv())[3] == "phx_reply"
        with pytest.raises(httpx.ConnectError):  # an untrusting client refuses it
            async with httpx.AsyncClient(base_url=emulator.rest_url) as client:
                await client.get("/_emulator/health")
    finally:
        assert await emulator.stop() == 0
    assert oct((tls_dir / "ca-key.pem").stat().st_mode & 0o777) == "0o600"
    cert = x509.load_pem_x509_certificate((tls_dir / "server.pem").read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "host.docker.internal" in names.get_values_for_type(x509.DNSName)


FROZEN_CLIENT = """
import asyncio, json, os, sys
from websockets.asyncio.client import connect
async def main():
    headers = {"x-api-key": os.environ["KEY"]}
    async with connect(sys.argv[1] + "?vsn=2.0.0", additional_headers=headers) as ws:
        await ws.send(json.dumps([None, "1", "phoenix", "heartbeat", {}]))
        await ws.recv()
        print("connected", flush=True)
        await asyncio.sleep(3600)
asyncio.run(main())
"""


async def test_shutdown_is_bounded_with_a_frozen_client(tmp_path: Path) -> None:
    emulator = await EmulatorProcess(
        ["--user-key", USER_KEY, "--shutdown-timeout", "2"], tmp_path / "emu.log"
    ).start()
    client = subprocess.Popen(
        [sys.executable, "-c", FROZEN_CLIENT, emulator.ws_url],
        stdout=subprocess.PIPE,
        env={**os.environ, "KEY": USER_KEY},
    )
    try:
        assert client.stdout is not None
        assert client.stdout.readline() == b"connected\n"
        client.send_signal(signal.SIGSTOP)  # it will never answer the close handshake
        started = time.monotonic()
        assert await emulator.stop(signal.SIGTERM, timeout=20) == 0
        assert time.monotonic() - started < 8
    finally:
        client.kill()
        client.wait(5)
