from __future__ import annotations

import pytest

from launcher.environment import LauncherEnv
from launcher.errors import LauncherError


def test_names_are_case_insensitive_and_exact_case_wins() -> None:
    env = LauncherEnv.from_environ(
        {"workspace_dir": "/ws", "band_api_key": "lower", "BAND_API_KEY": "upper", "Gh_Token": "g"}
    )
    assert env.workspace_dir == "/ws"
    assert env.credentials == {"BAND_API_KEY": "upper", "GH_TOKEN": "g"}


def test_credentials_are_not_in_the_repr() -> None:
    env = LauncherEnv.from_environ({"OPENAI_API_KEY": "sk-secret-value"})
    assert "sk-secret-value" not in repr(env)


def test_empty_sdk_home_still_fences_opt_band() -> None:
    assert LauncherEnv.from_environ({"BAND_SDK_HOME": ""}).sdk_home == "/opt/band"


@pytest.mark.parametrize(("value", "allowed"), [("", False), ("0", False), ("1", True)])
def test_insecure_flag(value: str, allowed: bool) -> None:
    env = LauncherEnv.from_environ({"BAND_KIT_ALLOW_INSECURE_ENDPOINTS": value})
    assert env.insecure_endpoints_allowed() is allowed


@pytest.mark.parametrize("value", ["true", "yes", "2"])
def test_insecure_flag_other_values_fail_in_config(value: str) -> None:
    env = LauncherEnv.from_environ({"BAND_KIT_ALLOW_INSECURE_ENDPOINTS": value})
    with pytest.raises(LauncherError, match=r"^\[config\] .*must be 1"):
        env.insecure_endpoints_allowed()


def test_expected_uid() -> None:
    assert LauncherEnv.from_environ({}).expected_uid() == 1000
    assert LauncherEnv.from_environ({"BAND_KIT_AGENT_UID": "1234"}).expected_uid() == 1234
    for bad in ("0", "-1", "agent"):
        with pytest.raises(LauncherError, match=r"^\[identity\]"):
            LauncherEnv.from_environ({"BAND_KIT_AGENT_UID": bad}).expected_uid()


@pytest.mark.parametrize(("value", "seconds"), [("", 0.0), ("0", 0.0), ("60", 60.0), ("2.5", 2.5)])
def test_endpoint_wait(value: str, seconds: float) -> None:
    env = LauncherEnv.from_environ({"BAND_KIT_ENDPOINT_WAIT_S": value})
    assert env.endpoint_wait_s() == seconds


@pytest.mark.parametrize("value", ["soon", "-1", "601", "nan", "inf"])
def test_endpoint_wait_other_values_fail_in_config(value: str) -> None:
    env = LauncherEnv.from_environ({"BAND_KIT_ENDPOINT_WAIT_S": value})
    with pytest.raises(LauncherError, match=r"^\[config\] BAND_KIT_ENDPOINT_WAIT_S must be"):
        env.endpoint_wait_s()
