"""The sbx runtime's grammar per version, against the simulator (no agent started)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from bandkit.manifest import Kind, Manifest, teardown
from bandkit.runtimes.base import SandboxError, SandboxSpec, Secret
from bandkit.runtimes.sbx import Grammar, SbxRuntime, parse_version
from bandkit.runtimes.sbx.cli import parse_json
from bandkit.runtimes.sbx.secrets import parse_custom_table
from tests.fakes.simharness import Sim, simulator

CANARY = "canary-sk-runtime-3b7d91e0"


@pytest.fixture(params=["0.35.0", "0.47.0"])
def sim(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sim]:
    with simulator(request.param) as s:
        s("policy", "init", "balanced", check=True)
        for key, value in s.env.items():
            monkeypatch.setenv(key, value)
        yield s


def calls(sim: Sim) -> list[list[str]]:
    lines = (sim.state / "calls.jsonl").read_text().splitlines()
    return [json.loads(line)["argv"] for line in lines]


def test_parse_version_and_json_with_preamble() -> None:
    assert parse_version("sbx version v0.35.0\nmore") == (0, 35, 0)
    assert parse_version("0.47.1") == (0, 47, 1)
    with pytest.raises(SandboxError, match="cannot read a version"):
        parse_version("garbage")
    assert parse_json('Starting daemon...\n{"sandboxes": []}') == {"sandboxes": []}


def test_version_is_detected_once(sim: Sim) -> None:
    rt = SbxRuntime()
    assert rt.cli.grammar is (
        Grammar.CURRENT if "0.47" in sim.env["SBX_SIM_VERSION"] else Grammar.LEGACY
    )
    rt.list()
    rt.has_secret("x", "h")
    assert [c for c in calls(sim) if c == ["version"]] == [["version"]]


def test_too_old_version_is_refused(sim: Sim, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SBX_SIM_VERSION", "0.31.0")
    with pytest.raises(SandboxError, match="too old"):
        _ = SbxRuntime().cli.grammar


def test_create_argv_per_grammar(sim: Sim, tmp_path: Path) -> None:
    kit = tmp_path / "kit"
    kit.mkdir()
    (kit / "spec.yaml").write_text("name: band-python-kit\n")
    spec = SandboxSpec("n", (Path("/w"),), kit=str(kit), image="img:local")
    argv = SbxRuntime().create_argv(spec)
    if "0.47" in sim.env["SBX_SIM_VERSION"]:
        assert argv == ["create", "--name", "n", "--template", "img:local", str(kit), "/w"]
    else:
        assert argv == [
            "create",
            "--name",
            "n",
            "--template",
            "img:local",
            "--kit",
            str(kit),
            "band-python-kit",
            "/w",
        ]


def test_secret_value_goes_by_stdin_where_the_version_allows(sim: Sim) -> None:
    rt = SbxRuntime()
    rt.set_secret("box", Secret("BAND_API_KEY", ("127.0.0.1",), CANARY))
    call = next(c for c in calls(sim) if c[:2] == ["secret", "set-custom"])
    if rt.cli.grammar is Grammar.CURRENT:
        assert "--value" not in call
        assert call[2:4] == ["--sandbox", "box"]
        assert rt.warnings == []
    else:
        assert call[2] == "box"
        assert call[-2:] == ["--value", "***"]
        assert "visible" in rt.warnings[0]
    assert rt.has_secret("box", "127.0.0.1")
    assert not rt.has_secret("box", "other")
    assert CANARY not in sim.outputs()
    assert all(CANARY not in w for w in rt.warnings)


def test_failure_messages_redact_the_value(sim: Sim) -> None:
    rt = SbxRuntime()
    rt.set_secret("box", Secret("K", ("h",), CANARY, placeholder="p1"))
    with pytest.raises(SandboxError) as err:
        rt.set_secret("box", Secret("K", ("h",), CANARY, placeholder="p2"))  # refused
    assert CANARY not in str(err.value)
    assert "another placeholder" in str(err.value)


def test_allow_adds_and_records_only_missing_rules(sim: Sim, tmp_path: Path) -> None:
    sim("policy", "allow", "network", "pre.example", check=True)  # someone else's rule
    with Manifest.open(tmp_path / "m.json") as manifest:
        rt = SbxRuntime(manifest=manifest)
        rt.allow("pre.example")
        rt.allow("pypi.org")  # allowed by the balanced preset
        rt.allow("new.example")
        assert [r.key for r in manifest.resources] == ["sbx/global/new.example"]
        assert sim("policy", "check", "network", "new.example").returncode == 0
        report = teardown(manifest, rt.removers())
    assert report.clean
    assert sim("policy", "check", "network", "new.example").returncode == 1
    assert sim("policy", "check", "network", "pre.example").returncode == 0  # untouched


def test_create_teardown_removes_sandbox_and_scoped_secret(sim: Sim, tmp_path: Path) -> None:
    ws = sim.workspace()
    with Manifest.open(tmp_path / "m.json") as manifest:
        rt = SbxRuntime(manifest=manifest)
        rt.create(SandboxSpec("box", (ws,), secrets=(Secret("K", ("h",), "v"),)))
        assert rt.list() == ["box"]
        with pytest.raises(SandboxError, match="already exists"):
            rt.create(SandboxSpec("box", (ws,)))
        kinds = [r.kind for r in manifest.resources]
        supervised = [Kind.PROCESS] if rt.supervised else []  # 0.43+: the held `sbx run`
        assert kinds == [Kind.SECRET, Kind.SANDBOX, *supervised]
        assert teardown(manifest, rt.removers()).clean
    assert rt.list() == []
    assert not rt.has_secret("box", "h")  # 0.35's rm leaves it: removed from the manifest


def test_remove_absent_sandbox_is_success(sim: Sim) -> None:
    SbxRuntime().remove("ghost")


def test_policy_not_initialized_is_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with simulator() as s:
        for key, value in s.env.items():
            monkeypatch.setenv(key, value)
        with pytest.raises(SandboxError, match="sbx policy init balanced"):
            SbxRuntime().create(SandboxSpec("n", (s.workspace(),)))


def test_parse_custom_table() -> None:
    text = (
        "SCOPE  TYPE  NAME  SECRET\n\nCUSTOM SECRETS\n"
        "SCOPE  TARGETS  ENV  PLACEHOLDER  SECRET\n"
        "box    a,b      K    proxy-managed ****\n"
    )
    assert parse_custom_table(text) == [
        {"scope": "box", "targets": ["a", "b"], "env": "K", "placeholder": "proxy-managed"}
    ]
