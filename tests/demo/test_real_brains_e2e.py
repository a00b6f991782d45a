"""`uv run invoke demo.up --brains real` end to end on the local runtime, as a user with
keys runs it, with the providers replaced by the LLM stub: the host sets
`ANTHROPIC_API_KEY` / `OPENAI_API_KEY` (canaries) and points `ANTHROPIC_BASE_URL` /
`OPENAI_BASE_URL` at the stub, the way an operator points them at a gateway. Nothing else
differs from a live run: the demo starts no stub of its own, the keys come from the host's
environment, and the stub plays the providers (it accepts only those keys, and picks each
role's script the way a provider picks a model: Anthropic by the PM's key, OpenAI by the
model name, since Sam and Jordan share one OpenAI key as with a real account).

Checked: the verdict is reached; every model call reached the stub over the role's wire
API with the host's key (no placeholder, no refusal); `DEV_MODEL` from the host reached
codex; the keys appear in no output, transcript, sandbox file or process environment;
nothing is left after the teardown.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from tests.demo import real_provider
from tests.demo.real_provider import DEV_MODEL, KEYS, Provider
from tests.demo.test_demo_e2e import Platform, assert_nothing_left, demo_env, invoke, up
from tests.demo.test_demo_e2e import platform as platform
from tests.demo.test_stub_brains_e2e import (
    WIRE,
    agent_homes,
    assert_no_canary_in_sandboxes,
    environments,
    unhandled,
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(900),
    pytest.mark.skipif(
        shutil.which("npm") is None or shutil.which("node") is None,
        reason="real brains on the local runtime install the pinned codex CLI with npm",
    ),
]


@pytest.fixture(scope="module")
def provider() -> Iterator[Provider]:
    with real_provider.provider() as running:
        yield running


def test_real_brains_with_the_host_keys_and_base_urls(
    platform: Platform, provider: Provider
) -> None:
    url = provider.url
    before = agent_homes()
    done = up(platform, "happy", "--brains", "real", "--keep", **provider.host_env())
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert f"brains: the providers' APIs with this host's keys ({url}, {url}/v1)" in out
    assert "brains: LLM stub at" not in out  # the run started no stub of its own
    assert "Jordan (Architect) → Maya (PM), Sam (Dev): @Maya (PM) @Sam (Dev) VERDICT:" in out
    keys = list(KEYS)
    running = environments(platform)
    assert running, "no sandbox process is running after a --keep run"
    assert all(key.encode() not in env for env in running for key in keys)
    assert any(b"OPENAI_PROXY_KEY=sk-placeholder-" in env for env in running)
    homes = agent_homes() - before
    assert_no_canary_in_sandboxes(platform, keys, homes=homes)
    down = invoke("demo.down", "--run-dir", str(platform.run_dir), env=demo_env())
    assert down.returncode == 0, down.stdout + down.stderr

    seen = provider.turns()
    assert [t for t in seen if t["status"] != 200] == []  # the host's keys, never a placeholder
    for agent, api in WIRE.items():
        mine = [t for t in seen if t["agent"] == agent]
        assert mine, f"{agent} never reached the provider"
        assert {t["api"] for t in mine} == {api}, agent
        assert any(str(t["rule"]).endswith("band_send_message") for t in mine), agent
    by = {agent: {t["selected_by"] for t in seen if t["agent"] == agent} for agent in WIRE}
    assert by == {"pm": {"key"}, "dev": {"model"}, "architect": {"model"}}
    assert {t["model"] for t in seen if t["agent"] == "dev"} == {DEV_MODEL}
    transcript = platform.layout.transcript.read_text(encoding="utf-8")
    assert_no_canary_in_sandboxes(
        platform, keys, done.stdout, done.stderr, down.stdout, down.stderr, transcript
    )
    assert_nothing_left(platform, down)
    assert agent_homes() & homes == set()
    assert unhandled(platform) == []
