"""band.yaml: reading, the strict schema, the spec, precedence, endpoints, agent id."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from band.docker.launcher import LaunchError, load_workspace_config

from bandkit.image.facts import STARTER_DIR
from launcher.config import (
    build_spec,
    locate_config,
    read_document,
    resolve_agent_id,
    resolve_endpoints,
    resolve_workspace,
    validated_spec,
)
from launcher.constants import CredentialSource
from launcher.environment import LauncherEnv
from launcher.errors import LauncherError, Phase
from launcher.schema import WorkspaceModel
from tests.launcher.fakes import CANARY, Box, band_config


def _doc(box: Box, config: dict[str, Any] | str) -> Any:
    return read_document(box.write(config))


def test_reads_a_mapping_and_digests_its_bytes(box: Box) -> None:
    document = _doc(box, box.config())
    assert document.data["schemaVersion"] == "1"
    assert len(document.digest) == 64


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("a: [1", "invalid YAML in"), ("- 1\n", "YAML mapping"), ("", "YAML mapping")],
)
def test_bad_documents(box: Box, text: str, fragment: str) -> None:
    with pytest.raises(LauncherError, match=rf"^\[config\] .*{fragment}"):
        _doc(box, text)


def test_missing_document_names_the_fix(box: Box) -> None:
    with pytest.raises(LauncherError, match="BAND_KIT_CONFIG_PATH"):
        read_document(box.ws / "band.yaml")


def test_workspace_and_config_location(box: Box) -> None:
    env = LauncherEnv(workspace_dir=str(box.ws))
    assert resolve_workspace(env) == box.ws
    assert locate_config(env, box.ws) == box.ws / "band.yaml"
    assert locate_config(LauncherEnv(config_path="c/x.yaml"), box.ws) == box.ws / "c/x.yaml"
    assert locate_config(LauncherEnv(config_path="/etc/b.yaml"), box.ws) == Path("/etc/b.yaml")
    with pytest.raises(LauncherError, match=r"^\[config\] WORKSPACE_DIR is not set"):
        resolve_workspace(LauncherEnv())


def test_validation_errors_list_locations_never_values(box: Box) -> None:
    config = box.config(agent={"id": CANARY, "color": CANARY})
    config["repo"] = {"url": f"https://t:{CANARY}@github.com/o/r.git"}
    with pytest.raises(LauncherError) as caught:
        validated_spec(_doc(box, config), trusted_digest=None)
    message = str(caught.value)
    assert caught.value.phase is Phase.CONFIG
    assert "agent.color: Extra inputs are not permitted" in message
    assert "repo.url" in message
    assert CANARY not in message


def test_trusted_digest_skips_the_schema_only_for_the_same_bytes(box: Box) -> None:
    bad = _doc(box, box.config(agent={"id": "a", "unknown": 1}))
    with pytest.raises(LauncherError):
        validated_spec(bad, trusted_digest="0" * 64)
    assert validated_spec(bad, trusted_digest=bad.digest).agent_id == "a"


VARIANTS: list[dict[str, Any]] = [
    {},
    {"agent": {"id": "x"}},
    {"band": {"restUrl": "https://r.example", "ws_url": "wss://w.example/s"}},
    {"project": {"path": "sub"}, "repo": {"url": " https://github.com/o/r.git ", "branch": "dev"}},
    {"repo": {"url": "git@github.com:o/r.git", "index": True, "branch": None}},
    {"credentials": None},
    {
        "credentials": {
            "source": "workspace-env-file",
            "path": ".band/secrets.env",
            "acknowledgePlaintextInSandbox": True,
        }
    },
    {"credentials": {"source": "workspace-env-file", "path": "s.env"}},
]


@pytest.mark.parametrize("variant", VARIANTS)
def test_spec_is_what_the_schema_validated(variant: dict[str, Any]) -> None:
    config = band_config(Path("/h"))
    config.update(copy.deepcopy(variant))
    config = {k: v for k, v in config.items() if v is not None}
    model = WorkspaceModel.model_validate(config)
    spec = build_spec(config)
    assert spec.agent_id == model.agent.id
    assert spec.entrypoint == model.agent.entrypoint
    assert (spec.rest_url, spec.ws_url) == (model.band.rest_url, model.band.ws_url)
    assert spec.project_path == model.project.path
    if model.repo is None:
        assert spec.repo is None
    else:
        assert spec.repo is not None
        assert spec.repo.url == model.repo.url.strip()
        assert (spec.repo.branch, spec.repo.index) == (model.repo.branch, model.repo.index)
    if model.credentials is None:
        assert spec.credentials is None
    else:
        assert spec.credentials is not None
        assert spec.credentials.source == CredentialSource(model.credentials.source)
        assert spec.credentials.path == model.credentials.path
        assert spec.credentials.acknowledge_plaintext == (
            model.credentials.acknowledge_plaintext_in_sandbox
        )
    assert spec.runtime.environment_path == model.runtime.environment_path
    assert spec.runtime.log_path == model.runtime.log_path


COMPAT: list[tuple[str, dict[str, Any], bool]] = [
    ("minimal", {}, True),
    (
        "snake-case-names",
        {
            "runtime": {
                "environment_path": "/v",
                "state_path": "/s",
                "cache_path": "/c",
                "log_path": "/l",
            }
        },
        True,
    ),
    ("unknown-top", {"x": 1}, False),
    ("unknown-nested", {"band": {"rest": "x"}}, False),
    ("version-2", {"schemaVersion": "2"}, False),
    ("version-int", {"schemaVersion": 1}, False),
    ("no-runtime", {"runtime": None}, False),
    ("runtime-missing-key", {"runtime": {"environmentPath": "/v"}}, False),
    ("repo-http", {"repo": {"url": "http://github.com/o/r"}}, False),
    ("repo-token", {"repo": {"url": "https://tok@github.com/o/r"}}, False),
    ("repo-ok", {"repo": {"url": "https://github.com/o/r", "branch": "main"}}, True),
    ("env-file-no-path", {"credentials": {"source": "workspace-env-file"}}, False),
    ("bad-source", {"credentials": {"source": "vault"}}, False),
    ("agent-not-mapping", {"agent": "x"}, False),
]


@pytest.mark.parametrize(("name", "change", "accepted"), COMPAT, ids=[c[0] for c in COMPAT])
def test_schema_accepts_what_upstream_accepts(
    box: Box, name: str, change: dict[str, Any], accepted: bool
) -> None:
    config = box.config()
    for key, value in change.items():
        if value is None:
            config.pop(key)
        else:
            config[key] = value
    path = box.write(config)
    try:
        load_workspace_config(path)
        upstream_ok = True
    except LaunchError:
        upstream_ok = False
    try:
        validated_spec(read_document(path), trusted_digest=None)
        ours_ok = True
    except LauncherError:
        ours_ok = False
    assert (ours_ok, upstream_ok) == (accepted, accepted)


def test_the_echo_agent_config_is_valid_for_both_launchers() -> None:
    document = read_document(STARTER_DIR / "band.yaml")
    spec = validated_spec(document, trusted_digest=None)
    assert spec.credentials is not None
    assert spec.credentials.source is CredentialSource.PROXY_MANAGED
    assert load_workspace_config(STARTER_DIR / "band.yaml").credentials is not None


def _spec(**sections: Any) -> Any:
    return build_spec(band_config(Path("/h"), **sections))


def test_endpoint_precedence_env_then_yaml_then_default() -> None:
    spec = _spec(band={"restUrl": "https://yaml.example", "wsUrl": "wss://yaml.example/s"})
    assert resolve_endpoints(_spec(), LauncherEnv()).rest_url == "https://app.band.ai"
    assert resolve_endpoints(spec, LauncherEnv()).ws_url == "wss://yaml.example/s"
    from_env = resolve_endpoints(spec, LauncherEnv(rest_url="https://env.example"))
    assert (from_env.rest_url, from_env.ws_url) == ("https://env.example", "wss://yaml.example/s")
    assert not from_env.insecure


def test_insecure_endpoints_are_flagged() -> None:
    env = LauncherEnv(
        rest_url="http://127.0.0.1:1", ws_url="ws://127.0.0.1:1/s", allow_insecure="1"
    )
    assert resolve_endpoints(_spec(), env).insecure
    with pytest.raises(LauncherError, match=r"^\[config\] BAND_REST_URL must be https://"):
        resolve_endpoints(_spec(), LauncherEnv(rest_url="http://127.0.0.1:1"))


def test_endpoint_error_never_echoes_userinfo() -> None:
    with pytest.raises(LauncherError) as caught:
        resolve_endpoints(_spec(), LauncherEnv(rest_url=f"https://u:{CANARY}@h.example"))
    assert CANARY not in str(caught.value)


def test_agent_id_precedence_and_refusals() -> None:
    assert resolve_agent_id(_spec(agent={"id": "yaml"}), LauncherEnv()) == "yaml"
    assert resolve_agent_id(_spec(agent={"id": "yaml"}), LauncherEnv(agent_id="env")) == "env"
    with pytest.raises(LauncherError, match="agent id missing"):
        resolve_agent_id(_spec(agent={}), LauncherEnv())
    with pytest.raises(LauncherError, match="band-kit provision"):
        resolve_agent_id(_spec(agent={"id": "replace-with-agent-id"}), LauncherEnv())


def test_yaml_is_parsed_safely(box: Box) -> None:
    text = yaml.safe_dump(box.config()) + "evil: !!python/object/apply:os.system ['true']\n"
    with pytest.raises(LauncherError, match="invalid YAML"):
        _doc(box, text)
