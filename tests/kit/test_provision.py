"""Self-registration against the emulator: the four-case table, the separate create
decision, collisions, crash re-runs, band.yaml round trip, and key custody."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bandkit.image.facts import STARTER_DIR
from bandkit.kit.band_yaml import read_agent_id, write_agent_id
from bandkit.kit.provision import Decision, ProvisionError, ProvisionRequest, decide, provision
from bandkit.manifest import Kind, Manifest
from bandkit.runtimes.base import Runtime
from bandkit.runtimes.local import LocalRuntime
from tests.fakes.simharness import Sim
from tests.kit.conftest import make_runtime, request_for
from tests.runtimes.helpers import Platform, echo_workspace


def workspace(platform: Platform, parent: Path, name: str = "ws") -> Path:
    return echo_workspace(
        parent, agent_id=None, rest_url=platform.rest_url, ws_url=platform.ws_url, name=name
    )


def agent_names(platform: Platform) -> list[str]:
    return [a["name"] for a in platform.agents()]


def run(
    platform: Platform, request: ProvisionRequest, runtime: Runtime, manifest: Manifest | None
) -> str:
    return provision(
        request, api_key=platform.user_key, runtime=runtime, manifest=manifest
    ).agent_id


# ------------------------------------------------------------------------- pure pieces


@pytest.mark.parametrize(
    ("local", "secret", "expected"),
    [
        (True, True, Decision.SKIP),
        (False, True, Decision.COLLISION),
        (True, False, Decision.HALF_DONE),
        (False, False, Decision.REGISTER),
    ],
)
def test_decision_table(local: bool, secret: bool, expected: Decision) -> None:
    assert decide(has_local_id=local, has_secret=secret) is expected


def test_write_agent_id_keeps_comments_and_layout(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    original = (STARTER_DIR / "band.yaml").read_text()
    (ws / "band.yaml").write_text(original)
    write_agent_id(ws, "3f0c2a9e-0000-4000-8000-000000000001")
    after = (ws / "band.yaml").read_text()
    changed = [
        (a, b) for a, b in zip(original.splitlines(), after.splitlines(), strict=True) if a != b
    ]
    assert changed == [
        ("  id: replace-with-agent-id", "  id: 3f0c2a9e-0000-4000-8000-000000000001")
    ]
    assert read_agent_id(ws) == "3f0c2a9e-0000-4000-8000-000000000001"


def test_write_agent_id_revalidates_with_the_launcher_schema(tmp_path: Path) -> None:
    from bandkit.kit.band_yaml import BandYamlError

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "band.yaml").write_text((STARTER_DIR / "band.yaml").read_text() + "typo: 1\n")
    with pytest.raises(BandYamlError, match="no longer validates"):
        write_agent_id(ws, "some-id")


# ------------------------------------------------------------------------- the table, live


def test_four_cases_against_the_emulator(
    platform: Platform, scratch: Path, backend: tuple[str, Sim | None]
) -> None:
    kind, _sim = backend
    name = f"prov-{kind.replace('.', '')}-four"
    ws = workspace(platform, scratch)
    with Manifest.open(scratch / "run" / "m.json", secrets=[platform.user_key]) as m:
        rt = make_runtime(kind, scratch / "run", m)
        # neither -> register, write id, inject
        agent_id = run(platform, request_for(platform, ws, name), rt, m)
        assert read_agent_id(ws) == agent_id
        assert rt.has_secret(name, "127.0.0.1")
        if isinstance(rt, LocalRuntime):  # the key goes to the agent API and socket only
            [stored] = rt.secrets.of(name)
            assert stored.scopes == (
                f"{platform.rest_url}/api/v1/agent",
                f"{platform.rest_url.replace('http:', 'ws:')}/api/v1/socket/websocket",
            )
        assert agent_names(platform).count(name) == 1
        # both -> skip: same id, no second agent
        assert run(platform, request_for(platform, ws, name), rt, m) == agent_id
        assert agent_names(platform).count(name) == 1
        # secret but no local id (another workspace, same --name) -> collision refused
        other = workspace(platform, scratch, "other")
        before = (other / "band.yaml").read_text()
        with pytest.raises(ProvisionError, match="already stored for sandbox name"):
            run(platform, request_for(platform, other, name), rt, m)
        assert (other / "band.yaml").read_text() == before
        # local id but no secret -> half-done refused, nothing minted
        rt.remove_secret(name, "127.0.0.1", "proxy-managed")
        with pytest.raises(ProvisionError, match="stopped after registering"):
            run(platform, request_for(platform, ws, name), rt, m)
        assert agent_names(platform).count(name) == 1
        assert [r.kind for r in m.resources] == [Kind.AGENT_ID, Kind.AGENT, Kind.SECRET]


def test_create_is_decided_separately(
    platform: Platform, scratch: Path, backend: tuple[str, Sim | None], agent_sdk: None
) -> None:
    kind, _sim = backend
    if kind == "local":
        pytest.skip("the local runtime would start the agent; covered by the e2e test")
    name = f"prov-{kind.replace('.', '')}-create"
    ws = workspace(platform, scratch)
    with Manifest.open(scratch / "run" / "m.json") as m:
        rt = make_runtime(kind, scratch / "run", m)
        agent_id = run(platform, request_for(platform, ws, name), rt, m)  # --no-create
        assert name not in rt.list()
        # A later run with create: registration is skipped, the sandbox gets created.
        from bandkit.kit.provision import provision as prov

        result = prov(
            request_for(platform, ws, name, create=True, kit=_kit(scratch)),
            api_key=platform.user_key,
            runtime=rt,
            manifest=m,
        )
        assert (result.agent_id, result.registered, result.created) == (agent_id, False, True)
        assert name in rt.list()
        again = prov(
            request_for(platform, ws, name, create=True, kit=_kit(scratch)),
            api_key=platform.user_key,
            runtime=rt,
            manifest=m,
        )
        assert (again.registered, again.created) == (False, False)
        rt.remove(name)


def _kit(parent: Path) -> str:
    from tests.runtimes.helpers import make_kit

    return str(make_kit(parent))


def test_description_and_key_are_checked_first(platform: Platform, scratch: Path) -> None:
    ws = workspace(platform, scratch)
    rt = make_runtime("local", scratch / "run")
    with pytest.raises(ProvisionError, match="10-500 characters"):
        provision(
            ProvisionRequest("n", "short", ws, platform.rest_url, create=False),
            api_key=platform.user_key,
            runtime=rt,
        )
    with pytest.raises(ProvisionError, match="BAND_API_KEY_USER"):
        provision(request_for(platform, ws, "n"), api_key="", runtime=rt)
    assert "n" not in agent_names(platform)


def test_secret_is_scoped_with_the_proxy_managed_placeholder(
    platform: Platform, scratch: Path, backend: tuple[str, Sim | None]
) -> None:
    kind, sim = backend
    if sim is None:
        pytest.skip("sbx only: the simulator shows the stored placeholder")
    name = f"prov-{kind.replace('.', '')}-ph"
    ws = workspace(platform, scratch)
    rt = make_runtime(kind, scratch / "run")
    run(platform, request_for(platform, ws, name), rt, None)
    if "0.47" in kind:
        listed = json.loads(sim("secret", "ls", "--sandbox", name, "--json").stdout)
        rows = listed["custom_secrets"]
    else:
        from bandkit.runtimes.sbx.secrets import parse_custom_table

        rows = parse_custom_table(sim("secret", "ls", name).stdout)
    assert [(r["scope"], r["env"], r["placeholder"]) for r in rows] == [
        (name, "BAND_API_KEY", "proxy-managed")
    ]
    set_calls = [
        json.loads(line)["argv"]
        for line in (sim.state / "calls.jsonl").read_text().splitlines()
        if '"set-custom"' in line
    ]
    assert ("--value" in set_calls[0]) is ("0.35" in kind)  # stdin wherever allowed
