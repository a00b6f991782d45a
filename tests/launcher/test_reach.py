"""The reach phase: a bounded wait for the endpoints before the exec, never a failure."""

from __future__ import annotations

import logging
import socket
import threading

import pytest

from launcher.reach import wait_for_endpoints

TOKEN = "tok3n-in-the-path"


class Clock:
    """A fake clock the fake sleep advances."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_listening_endpoint_is_reached_at_once_and_nothing_is_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        urls = (f"http://127.0.0.1:{port}/{TOKEN}/", f"ws://127.0.0.1:{port}/{TOKEN}/socket")
        with caplog.at_level(logging.INFO, logger="launcher"):
            assert wait_for_endpoints(urls, 5.0)
    assert "phase reach" not in caplog.text


def test_it_waits_until_the_endpoint_listens(caplog: pytest.LogCaptureFixture) -> None:
    """Refused first (nothing listens), then a real server appears on the port."""
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    ready = threading.Event()
    attempts = 0

    def connect(target: tuple[str, int], timeout: float) -> object:
        nonlocal attempts
        attempts += 1
        if attempts == 3:
            ready.set()  # the server below is listening from now on
        return socket.create_connection(target, timeout)

    with caplog.at_level(logging.INFO, logger="launcher"):
        server: socket.socket | None = None
        clock = Clock()

        def sleep(seconds: float) -> None:
            nonlocal server
            clock.sleep(seconds)
            if ready.is_set() and server is None:
                server = socket.create_server(("127.0.0.1", port))

        try:
            assert wait_for_endpoints(
                (f"http://127.0.0.1:{port}/{TOKEN}/",),
                30.0,
                connect=connect,
                clock=clock,
                sleep=sleep,
            )
        finally:
            if server is not None:
                server.close()
    assert attempts == 4
    assert f"waiting for 127.0.0.1:{port}" in caplog.text
    assert f"127.0.0.1:{port} answered after" in caplog.text
    assert TOKEN not in caplog.text


def test_an_unresolvable_name_is_waited_for_then_the_agent_starts_anyway(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    calls = 0

    def connect(target: tuple[str, int], timeout: float) -> object:
        nonlocal calls
        calls += 1
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    with caplog.at_level(logging.INFO, logger="launcher"):
        reached = wait_for_endpoints(
            (f"http://bkp-0123:8080/{TOKEN}/", f"ws://bkp-0123:8081/{TOKEN}/socket"),
            3.0,
            connect=connect,
            clock=clock,
            sleep=clock.sleep,
        )
    assert reached is False
    assert 3.0 <= clock.now < 3.5  # bounded by the wait, not by the number of endpoints
    assert calls > 10
    said = caplog.text
    assert said.count("waiting for bkp-0123:8080: its name does not resolve") == 1  # once per cause
    assert "still unreachable after 3 s" in said
    assert "starting the agent anyway" in said
    assert TOKEN not in said


def test_no_wait_asked_probes_nothing() -> None:
    def connect(target: tuple[str, int], timeout: float) -> object:
        raise AssertionError("probed without a wait")

    assert wait_for_endpoints(("http://nowhere:1/",), 0.0, connect=connect)


def test_each_host_and_port_is_probed_once_with_scheme_default_ports() -> None:
    probed: list[tuple[str, int]] = []

    def connect(target: tuple[str, int], timeout: float) -> object:
        probed.append(target)
        return None

    urls = ("https://platform.example/api", "wss://platform.example/socket", "http://p:8080/x")
    assert wait_for_endpoints(urls, 1.0, connect=connect)
    assert probed == [("platform.example", 443), ("p", 8080)]
