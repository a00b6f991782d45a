"""Registration over a faulty network: timeout disambiguation (the platform delays or
loses the answer) and the 403 / 422 / other error mapping. A fault proxy sits between the
provisioning code and the emulator."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from bandkit.kit.band_yaml import read_agent_id
from bandkit.kit.platform_api import describe_register_error
from bandkit.kit.provision import ProvisionError, ProvisionRequest, provision
from bandkit.manifest import Kind, Manifest
from bandkit.runtimes.local import LocalRuntime
from tests.kit.faults import REGISTER, Faults, fault_proxy
from tests.runtimes.helpers import Platform, echo_workspace

DESCRIPTION = "an echo agent provisioned by the tests"


def attempt(
    platform: Platform, scratch: Path, rest_url: str, name: str, m: Manifest, **extra: float
) -> None:
    ws = scratch / "ws"
    if not ws.exists():
        echo_workspace(scratch, agent_id=None, rest_url=platform.rest_url, ws_url=platform.ws_url)
    request = ProvisionRequest(
        name=name,
        description=DESCRIPTION,
        workspace=ws,
        rest_url=rest_url,
        host="127.0.0.1",
        create=False,
        **extra,  # type: ignore[arg-type]
    )
    provision(request, api_key=platform.user_key, runtime=LocalRuntime(scratch / "run"), manifest=m)


def names(platform: Platform) -> list[str]:
    return [a["name"] for a in platform.agents()]


def test_timeout_then_confirmed_absent(platform: Platform, scratch: Path) -> None:
    faults = Faults(hold_register=True)
    with fault_proxy(platform.rest_url, faults) as url, Manifest.open(scratch / "m.json") as m:
        with pytest.raises(ProvisionError) as err:
            attempt(platform, scratch, url, "to-absent", m, timeout_s=1, recovery_timeout_s=10)
        assert "CONFIRMED_ABSENT" in str(err.value)
        assert "safe to retry" in str(err.value)
        assert "to-absent" not in names(platform)
        assert m.find(Kind.AGENT, f"{url}#to-absent") is None  # nothing to clean up
        assert f"POST {REGISTER}" in faults.seen
        assert "GET /api/v1/me/agents" in faults.seen  # the lookup by name
        # Retrying (the network is fine now) registers exactly one agent.
        faults.hold_register = False
        attempt(platform, scratch, url, "to-absent", m)
    assert names(platform).count("to-absent") == 1
    assert read_agent_id(scratch / "ws") != "replace-with-agent-id"


def test_timeout_then_confirmed_present(platform: Platform, scratch: Path) -> None:
    faults = Faults(drop_register_answer=True)
    with fault_proxy(platform.rest_url, faults) as url, Manifest.open(scratch / "m.json") as m:
        with pytest.raises(ProvisionError) as err:
            attempt(platform, scratch, url, "to-present", m, timeout_s=1, recovery_timeout_s=10)
        ids = [a["id"] for a in platform.agents() if a["name"] == "to-present"]
        assert len(ids) == 1
        message = str(err.value)
        assert "CONFIRMED_PRESENT" in message
        assert ids[0] in message
        assert "key is lost" in message
        entry = m.find(Kind.AGENT, f"{url}#to-present")
        assert entry is not None
        assert entry.details["id"] == ids[0]  # unprovision can delete the orphan
    assert read_agent_id(scratch / "ws") == "replace-with-agent-id"


def test_timeout_then_unknown_and_rerun_is_refused(platform: Platform, scratch: Path) -> None:
    faults = Faults(hold_register=True, hold_all_after_register=True)
    with fault_proxy(platform.rest_url, faults) as url, Manifest.open(scratch / "m.json") as m:
        with pytest.raises(ProvisionError) as err:
            attempt(platform, scratch, url, "to-unknown", m, timeout_s=1, recovery_timeout_s=1)
        assert "UNKNOWN" in str(err.value)
        assert m.find(Kind.AGENT, f"{url}#to-unknown") is not None  # kept: maybe it exists
        faults.hold_register = faults.hold_all_after_register = False
        with pytest.raises(ProvisionError, match=r"kit\.unprovision --name to-unknown"):
            attempt(platform, scratch, url, "to-unknown", m)
    assert "to-unknown" not in names(platform)


CASES = [
    (403, {"error": {"code": "forbidden", "message": "cap", "request_id": "r"}}, "agent cap"),
    (403, {"error": {"code": "forbidden", "message": "cap"}}, "agent cap is reached"),
    (422, {"error": {"details": {"name": ["has already been taken"]}}}, "already exists"),
    (422, {"error": {"details": {"/agent/name": ["is invalid"]}}}, "already exists"),
    (422, {"error": {"message": "x"}}, "already exists"),
    (
        422,
        {"error": {"details": {"/agent/description": ["should be at least 10 characters"]}}},
        "/agent/description: should be at least 10 characters",
    ),
    (500, {"error": {"code": "internal", "message": "database down"}}, "database down"),
]


@pytest.mark.parametrize(("status", "body", "expected"), CASES)
def test_error_answers_are_mapped(
    platform: Platform, scratch: Path, status: int, body: dict[str, object], expected: str
) -> None:
    faults = Faults(answer=(status, body))
    with fault_proxy(platform.rest_url, faults) as url, Manifest.open(scratch / "m.json") as m:
        with pytest.raises(ProvisionError) as err:
            attempt(platform, scratch, url, f"err-{status}", m)
        assert expected in str(err.value)
        assert m.resources == ()  # the platform said no: nothing recorded, re-run is free
    assert read_agent_id(scratch / "ws") == "replace-with-agent-id"


def test_describe_register_error_without_body() -> None:
    assert describe_register_error(502, None) == "registration failed: HTTP 502"
    assert dataclasses.is_dataclass(Faults)
