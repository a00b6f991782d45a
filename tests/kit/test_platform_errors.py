"""Which failures of a platform call are tolerated: the network's and the platform's.

`register_agent` turns an unreachable platform into `RegistrationFailed`, and the lookup
after a registration timeout turns one into UNKNOWN with the reason. Anything else (a
bug, even one raised inside httpx) surfaces with its traceback instead of passing for an
unreachable platform or an UNKNOWN outcome.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from band_rest.core.api_error import ApiError

from bandkit.kit import platform_api, provision
from bandkit.kit.platform_api import RegistrationFailed, describe_failure
from bandkit.kit.provision import TimeoutOutcome, describe_timeout

URL = "http://127.0.0.1:9"


def _client_raising(monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    async def fails(**_: Any) -> Any:
        raise error

    @asynccontextmanager
    async def client(api_key: str, rest_url: str) -> AsyncIterator[Any]:
        yield SimpleNamespace(human_api_agents=SimpleNamespace(register_my_agent=fails))

    monkeypatch.setattr(platform_api, "client", client)


def _register() -> tuple[str, str]:
    return asyncio.run(
        platform_api.register_agent(
            api_key="k", rest_url=URL, name="n", description="d" * 10, timeout_s=5
        )
    )


@pytest.mark.parametrize(
    "error", [httpx.ConnectError("refused"), httpx.ReadTimeout("slow"), ConnectionResetError()]
)
def test_an_unreachable_platform_is_a_registration_failure(
    monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    _client_raising(monkeypatch, error)
    with pytest.raises(RegistrationFailed, match=f"cannot reach {URL}"):
        _register()


def test_a_bug_inside_httpx_is_not_an_unreachable_platform(monkeypatch: pytest.MonkeyPatch) -> None:
    _client_raising(monkeypatch, httpx.StreamConsumed())  # misuse of a response: ours
    with pytest.raises(httpx.StreamConsumed):
        _register()


def _lookup_raising(monkeypatch: pytest.MonkeyPatch, error: Exception) -> tuple[Any, ...]:
    async def fails(**_: Any) -> str | None:
        raise error

    monkeypatch.setattr(provision, "find_agent_by_name", fails)
    return asyncio.run(provision._after_timeout("k", URL, "n", 5))


def test_a_failed_lookup_is_unknown_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    outcome, agent_id, why = _lookup_raising(monkeypatch, httpx.ConnectError("refused"))
    assert (outcome, agent_id, why) == (
        TimeoutOutcome.UNKNOWN,
        None,
        "the lookup failed: ConnectError: refused",
    )
    message = describe_timeout(outcome, "n", None, 1, why=why)
    assert "UNKNOWN: could not confirm whether 'n' was registered (the lookup failed" in message
    body = {"error": {"message": "database down"}}
    _, _, why = _lookup_raising(monkeypatch, ApiError(status_code=503, body=body))
    assert why == "the lookup failed: HTTP 503: database down"


def test_a_bug_in_the_lookup_surfaces_instead_of_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(AttributeError, match="no attribute 'data'"):
        _lookup_raising(monkeypatch, AttributeError("'NoneType' object has no attribute 'data'"))


def test_describe_failure_names_the_failure_without_headers() -> None:
    api = ApiError(headers={"x-secret": "s3cr3t"}, status_code=500, body="oops")
    assert describe_failure(api) == "HTTP 500"
    assert describe_failure(TimeoutError()) == "no answer in time"
    assert describe_failure(httpx.ConnectError("refused")) == "ConnectError: refused"
    assert describe_failure(ConnectionResetError()) == "ConnectionResetError"
