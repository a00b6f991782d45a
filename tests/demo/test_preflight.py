"""What `demo.up` refuses before it changes anything, the caps' precedence, and the exit
codes (the table in `outcome` is the one the README documents)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from bandkit.demo import DemoError, preflight
from bandkit.demo.outcome import EXIT_CODES, Outcome, from_meeting
from bandkit.demo.preflight import UpOptions
from bandkit.manifest import Kind, Manifest
from bandkit.runtimes.local import LocalRuntime
from examples.docker_demo.breaker import StopCause
from examples.docker_demo.scenario import load

README = Path(__file__).resolve().parents[2] / "examples" / "docker_demo" / "README.md"


def options(tmp_path: Path, **changes: object) -> UpOptions:
    return UpOptions(**{"run_dir": tmp_path, "runtime": "local", **changes})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("changes", "env", "fragment"),
    [
        ({"brains": "llm"}, {}, "--brains must be one of scripted, stub, real"),
        ({"brains": "real"}, {}, "--brains real needs ANTHROPIC_API_KEY and OPENAI_API_KEY"),
        ({"scenario": "nope"}, {}, "choose one of happy"),
        ({"platform": "cloud"}, {}, "--platform must be local or real"),
        ({"platform": "real"}, {"BAND_REST_URL": "https://x"}, "BAND_WS_URL, BAND_API_KEY_USER"),
        ({"runtime": "vm"}, {}, "unknown runtime"),
        ({"topic": "  "}, {}, "--topic must not be empty"),
        ({}, {"DEMO_HARD_CAP": "lots"}, "DEMO_HARD_CAP must be"),
        ({"headless": True}, {"DEMO_INTERACTIVE": "1"}, "contradicts"),
    ],
)
def test_bad_options_fail_before_anything_is_made(
    tmp_path: Path, changes: dict[str, object], env: dict[str, str], fragment: str
) -> None:
    with pytest.raises(DemoError, match=re.escape(fragment)):
        preflight.check(options(tmp_path, **changes), env)
    assert list(tmp_path.iterdir()) == []


def test_caps_scenario_over_defaults_and_environment_over_both() -> None:
    slow = load("slow")
    assert preflight.breaker_config(slow, headless=True, env={}).wall_clock_s == 12
    env = {"DEMO_WALL_CLOCK_S": "5", "OTHER": "x"}
    assert preflight.breaker_config(slow, headless=True, env=env).wall_clock_s == 5
    assert preflight.breaker_config(load("happy"), headless=True, env={}).wall_clock_s == 900


def test_headless_flag_and_environment_decide_the_open_floor() -> None:
    happy = load("happy")
    assert preflight.breaker_config(happy, headless=False, env={}).interactive is True
    assert preflight.breaker_config(happy, headless=True, env={}).interactive is False
    env = {"DEMO_HEADLESS": "1"}
    assert preflight.breaker_config(happy, headless=False, env=env).interactive is False


def test_a_known_user_key_is_hidden_from_the_start(tmp_path: Path) -> None:
    (tmp_path / "platform-user-key").write_text("canary-key-123\n")
    plan = preflight.check(options(tmp_path), {})
    assert plan.known_secrets == ("canary-key-123",)
    real = preflight.check(
        options(tmp_path, platform="real"),
        {"BAND_REST_URL": "https://x", "BAND_WS_URL": "wss://x", "BAND_API_KEY_USER": "k-1"},
    )
    assert real.known_secrets == ("k-1",)


def test_an_unfinished_run_is_not_clobbered(tmp_path: Path) -> None:
    runtime = LocalRuntime(tmp_path / "rt")
    with Manifest.open(tmp_path / "manifest.json") as manifest:
        preflight.refuse_to_clobber(manifest, runtime)  # empty: fine
        manifest.record(Kind.WORKSPACE, str(tmp_path / "ws"))
        with pytest.raises(DemoError, match=r"unfinished demo run .* `uv run invoke demo.down`"):
            preflight.refuse_to_clobber(manifest, runtime)


def test_an_existing_demo_sandbox_is_not_clobbered(tmp_path: Path) -> None:
    runtime = LocalRuntime(tmp_path / "rt")
    box = tmp_path / "rt" / "sandboxes" / "band-demo-dev"
    box.mkdir(parents=True)
    (box / "sandbox.json").write_text('{"workspaces": [], "env": {}}')
    with (
        Manifest.open(tmp_path / "manifest.json") as manifest,
        pytest.raises(DemoError, match="band-demo-dev already exist"),
    ):
        preflight.refuse_to_clobber(manifest, runtime)


@pytest.mark.parametrize(
    ("cause", "verdict", "outcome"),
    [
        (StopCause.GRACE, True, Outcome.VERDICT),
        (StopCause.OPEN_FLOOR_IDLE, True, Outcome.VERDICT),
        (StopCause.PRESENTER_END, True, Outcome.VERDICT),
        (StopCause.PRESENTER_END, False, Outcome.PRESENTER_ENDED),
        (StopCause.HARD_CAP, False, Outcome.HARD_CAP),
        (StopCause.WALL_CLOCK, False, Outcome.WALL_CLOCK),
        (StopCause.LEFT_BLOCK, False, Outcome.FAILED),
        (None, False, Outcome.FAILED),
    ],
)
def test_how_a_meeting_ended_is_its_outcome(
    cause: StopCause | None, verdict: bool, outcome: Outcome
) -> None:
    assert from_meeting(cause, verdict_reached=verdict) is outcome


def test_exit_codes_are_distinct_and_documented() -> None:
    assert len(set(EXIT_CODES.values())) == len(Outcome)
    assert EXIT_CODES[Outcome.VERDICT] == 0
    assert EXIT_CODES[Outcome.FAILED] == 1
    documented = dict(re.findall(r"^\| (\d+) \| `(\w+)` \|", README.read_text(), re.MULTILINE))
    assert documented == {str(code): outcome.value for outcome, code in EXIT_CODES.items()}


def test_auto_falls_back_to_local_when_the_kit_image_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bandkit.runtimes.base import RuntimeName

    monkeypatch.setattr(preflight, "resolve_name", lambda choice: RuntimeName.DOCKER)
    name, notes = preflight.choose_runtime("auto", has_image=lambda ref: False)
    assert name is RuntimeName.LOCAL
    assert "is not built (`uv run invoke image.build`); using the local runtime" in notes[0]
    assert preflight.choose_runtime("auto", has_image=lambda ref: True) == (RuntimeName.DOCKER, ())
    assert preflight.choose_runtime("docker", has_image=lambda ref: False)[0] is RuntimeName.DOCKER


def test_auto_passes_over_sbx_for_the_framework_brains(monkeypatch: pytest.MonkeyPatch) -> None:
    """sbx installed: auto would pick it, but stub/real brains do not run there yet, so
    auto goes on to docker (or local) and says why, instead of refusing."""
    from bandkit.runtimes import select
    from bandkit.runtimes.base import RuntimeName

    def installed_sbx_no_docker(choice: str, **probes: Callable[[], bool]) -> RuntimeName:
        return select.resolve_name(
            choice, has_sbx=probes.get("has_sbx", lambda: True), has_docker=lambda: False
        )

    monkeypatch.setattr(preflight, "resolve_name", installed_sbx_no_docker)
    name, notes = preflight.choose_runtime("auto", skip_sbx=True)
    assert name is RuntimeName.LOCAL
    assert notes == ("runtime auto: the stub and real brains do not run on sbx yet; using local",)
    assert preflight.choose_runtime("auto")[0] is RuntimeName.SBX  # scripted brains: sbx
    assert preflight.choose_runtime("sbx", skip_sbx=True)[0] is RuntimeName.SBX  # as asked
