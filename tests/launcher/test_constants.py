"""One fact, one place: our constants against band-sdk's and the contract."""

from __future__ import annotations

import band.credentials
import band.docker.launcher as upstream

from launcher.constants import (
    AGENT_HOME,
    AGENT_UID,
    CREDENTIAL_NAMES,
    DEFAULT_REST_URL,
    DEFAULT_WS_URL,
    INSECURE_ENDPOINTS_ENV,
    PLACEHOLDER_AGENT_ID,
    PROXY_MANAGED,
    CredentialName,
    CredentialSource,
)
from launcher.errors import LauncherError, Phase


def test_shared_values_match_band_sdk() -> None:
    assert band.credentials.PROXY_MANAGED_API_KEY == PROXY_MANAGED
    assert upstream.PLACEHOLDER_AGENT_ID == PLACEHOLDER_AGENT_ID
    assert upstream.AGENT_UID == AGENT_UID == 1000
    assert upstream.AGENT_HOME == AGENT_HOME == "/home/agent"
    assert (upstream.DEFAULT_REST_URL, upstream.DEFAULT_WS_URL) == (
        DEFAULT_REST_URL,
        DEFAULT_WS_URL,
    )
    assert [n.value for n in upstream.CredentialName] == list(CREDENTIAL_NAMES)
    assert {s.value for s in upstream.CredentialSource} == {s.value for s in CredentialSource}


def test_documented_credential_names() -> None:
    assert CREDENTIAL_NAMES == (
        "BAND_API_KEY",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "COPILOT_GITHUB_TOKEN",
        "GH_TOKEN",
        "GITHUB_TOKEN",
    )
    assert tuple(CredentialName) == CREDENTIAL_NAMES
    assert INSECURE_ENDPOINTS_ENV == "BAND_KIT_ALLOW_INSECURE_ENDPOINTS"


def test_phases_in_order_and_the_error_renders_its_phase() -> None:
    assert [p.value for p in Phase] == [
        "identity",
        "config",
        "paths",
        "credentials",
        "repo",
        "sync",
        "exec",
    ]
    error = LauncherError(Phase.SYNC, "uv.lock not found")
    assert str(error) == "[sync] uv.lock not found"
    assert error.phase is Phase.SYNC
    assert not issubclass(LauncherError, ValueError)  # a broad `except ValueError` misses it
