"""The `tests` session denies the network: only loopback and UNIX sockets connect."""

from __future__ import annotations

import socket

import pytest


def test_the_unit_suite_refuses_a_non_loopback_connect(pytestconfig: pytest.Config) -> None:
    if not pytestconfig.getoption("--disable-socket"):
        pytest.skip("the guard is on in `nox -s tests` (run the suite through nox)")
    import pytest_socket

    # The guard raises before any packet leaves (a documentation-range address).
    with pytest.raises(pytest_socket.SocketConnectBlockedError):
        socket.create_connection(("198.51.100.7", 80), timeout=0.01)


def test_loopback_still_connects() -> None:
    server = socket.create_server(("127.0.0.1", 0))
    try:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
    finally:
        server.close()
