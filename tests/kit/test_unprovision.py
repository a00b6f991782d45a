"""`kit.unprovision` puts band.yaml's agent.id back once the agent and its sandbox are
gone, so provision -> unprovision -> provision registers a fresh agent; a partial
teardown keeps the id and says why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bandkit.image.facts import STARTER_DIR
from bandkit.kit import commands as provision_run
from bandkit.kit.band_yaml import read_agent_id, reset_agent_id, write_agent_id
from bandkit.manifest import Kind, Manifest
from launcher.constants import PLACEHOLDER_AGENT_ID
from tests.kit.conftest import request_for, sim_context
from tests.runtimes.helpers import Platform, echo_workspace, make_kit


def ids_named(platform: Platform, name: str) -> list[str]:
    return [a["id"] for a in platform.agents() if a["name"] == name]


# ------------------------------------------------------------------------- band.yaml


def test_reset_restores_the_starter_byte_for_byte(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    original = (STARTER_DIR / "band.yaml").read_text()
    (ws / "band.yaml").write_text(original)
    write_agent_id(ws, "3f0c2a9e-0000-4000-8000-000000000001")
    assert reset_agent_id(ws / "band.yaml", "3f0c2a9e-0000-4000-8000-000000000001")
    assert (ws / "band.yaml").read_text() == original  # comments and layout kept
    assert read_agent_id(ws) == PLACEHOLDER_AGENT_ID


def test_reset_leaves_someone_elses_id_and_a_missing_file_alone(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "band.yaml").write_text((STARTER_DIR / "band.yaml").read_text())
    write_agent_id(ws, "the-id-a-person-put-there")
    before = (ws / "band.yaml").read_text()
    assert not reset_agent_id(ws / "band.yaml", "the-id-provisioning-wrote")
    assert (ws / "band.yaml").read_text() == before
    assert not reset_agent_id(tmp_path / "gone" / "band.yaml", "x")


def test_an_edit_that_would_not_validate_leaves_the_file_untouched(tmp_path: Path) -> None:
    from bandkit.kit.band_yaml import BandYamlError

    ws = tmp_path / "ws"
    ws.mkdir()
    broken = (STARTER_DIR / "band.yaml").read_text() + "typo: 1\n"
    (ws / "band.yaml").write_text(broken)
    with pytest.raises(BandYamlError, match="left unchanged"):
        write_agent_id(ws, "some-id")
    assert (ws / "band.yaml").read_text() == broken
    assert sorted(p.name for p in ws.iterdir()) == ["band.yaml"]  # no temp file left


# ------------------------------------------------------------------------- the cycle, live


@pytest.mark.parametrize("kind", ["local", "sbx-0.47"])
def test_provision_unprovision_provision_registers_a_fresh_agent(
    kind: str,
    platform: Platform,
    scratch: Path,
    agent_sdk: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = f"cycle-{kind.replace('.', '')}"
    ws = echo_workspace(scratch, agent_id=None, rest_url=platform.rest_url, ws_url=platform.ws_url)
    original = (ws / "band.yaml").read_text()
    run_dir = scratch / "run"
    runtime, extra = "local", {}
    with sim_context("0.47.0", monkeypatch) as sim:
        if kind.startswith("sbx"):
            runtime, extra = "sbx", {"create": True, "kit": str(make_kit(scratch))}

        def provision() -> str:
            result = provision_run.run(
                request_for(platform, ws, name, **extra),
                runtime=runtime,
                run_dir=run_dir,
                api_key=platform.user_key,
                log=print,
            )
            assert result.registered
            return result.agent_id

        first = provision()
        assert read_agent_id(ws) == first
        assert ids_named(platform, name) == [first]
        if runtime == "sbx":
            assert [s["name"] for s in json.loads(sim("ls", "--json").stdout)["sandboxes"]] == [
                name
            ]

        report = provision_run.unprovision(name, run_dir=run_dir, api_key=platform.user_key)
        assert report.clean, report.lines()
        assert f"removed agent-id:{(ws / 'band.yaml').resolve()}" in report.lines()
        assert ids_named(platform, name) == []
        assert (ws / "band.yaml").read_text() == original  # placeholder back, layout kept
        if runtime == "sbx":
            assert json.loads(sim("ls", "--json").stdout) == {"sandboxes": []}

        second = provision()  # a fresh registration, not a refusal
        assert second != first
        assert read_agent_id(ws) == second
        assert ids_named(platform, name) == [second]

        report = provision_run.unprovision(name, run_dir=run_dir, api_key=platform.user_key)
        assert report.clean, report.lines()
        assert ids_named(platform, name) == []
        assert read_agent_id(ws) == PLACEHOLDER_AGENT_ID


def test_partial_teardown_keeps_the_id_and_says_so(platform: Platform, scratch: Path) -> None:
    name = "cycle-partial"
    ws = echo_workspace(scratch, agent_id=None, rest_url=platform.rest_url, ws_url=platform.ws_url)
    run_dir = scratch / "run"
    agent_id = provision_run.run(
        request_for(platform, ws, name),
        runtime="local",
        run_dir=run_dir,
        api_key=platform.user_key,
        log=print,
    ).agent_id
    with_id = (ws / "band.yaml").read_text()

    # A key the platform refuses: the agent cannot be deleted, so agent.id must stay.
    report = provision_run.unprovision(name, run_dir=run_dir, api_key="wrong-user-key")
    assert not report.clean
    failed = {resource.kind: message for resource, message in report.failed}
    assert set(failed) == {Kind.AGENT, Kind.AGENT_ID}
    assert f"kept agent.id {agent_id}" in failed[Kind.AGENT_ID]
    assert "agent:" in failed[Kind.AGENT_ID]  # names what is still there
    assert (ws / "band.yaml").read_text() == with_id
    assert ids_named(platform, name) == [agent_id]
    with Manifest.open(provision_run.manifest_path(run_dir, name)) as m:
        assert [r.kind for r in m.resources] == [Kind.AGENT_ID, Kind.AGENT]

    # Fixed: the re-run deletes the agent, then resets the id.
    report = provision_run.unprovision(name, run_dir=run_dir, api_key=platform.user_key)
    assert report.clean, report.lines()
    assert ids_named(platform, name) == []
    assert read_agent_id(ws) == PLACEHOLDER_AGENT_ID
    assert not provision_run.manifest_path(run_dir, name).exists()


def test_an_id_changed_since_provisioning_is_not_cleared(platform: Platform, scratch: Path) -> None:
    name = "cycle-changed"
    ws = echo_workspace(scratch, agent_id=None, rest_url=platform.rest_url, ws_url=platform.ws_url)
    run_dir = scratch / "run"
    provision_run.run(
        request_for(platform, ws, name),
        runtime="local",
        run_dir=run_dir,
        api_key=platform.user_key,
        log=print,
    )
    write_agent_id(ws, "an-id-the-person-set-by-hand")
    report = provision_run.unprovision(name, run_dir=run_dir, api_key=platform.user_key)
    assert report.clean, report.lines()
    assert read_agent_id(ws) == "an-id-the-person-set-by-hand"
