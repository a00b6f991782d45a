"""The LLM stub playing both providers for `--brains real` tests: the host's keys (two
canaries) are the only ones it accepts; Anthropic's picks the PM's script, OpenAI's is
shared by Sam and Jordan as on a real account, so their scripts are picked by model."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bandkit.demo.stub_scripts import stub_script
from bandkit.fsio import write_private
from bandkit.llm import service as llm_service
from examples.docker_demo.cast import DEFAULT_TOPIC, Role
from examples.docker_demo.scenario import load
from tests.runtimes.helpers import scratch_dir

ANTHROPIC_KEY = "sk-ant-HOSTKEY-e2e-4f1c9a7b2d6e8f0a"
OPENAI_KEY = "sk-HOSTKEY-e2e-0a8f6e2d7b9a1c4f"
KEYS = (ANTHROPIC_KEY, OPENAI_KEY)
DEV_MODEL = "dev-model-from-the-host"
ARCHITECT_MODEL = "gpt-4.1-mini"  # the demo's CrewAI default: left unset, selected by it
MODELS = {Role.DEV: [DEV_MODEL], Role.ARCHITECT: [ARCHITECT_MODEL]}


@dataclass(frozen=True)
class Provider:
    url: str
    journal: Path

    def host_env(self) -> dict[str, str]:
        """What a user with keys exports, base URLs pointed at this provider."""
        return {
            "ANTHROPIC_API_KEY": ANTHROPIC_KEY,
            "OPENAI_API_KEY": OPENAI_KEY,
            "ANTHROPIC_BASE_URL": self.url,
            "OPENAI_BASE_URL": f"{self.url}/v1",
            "DEV_MODEL": DEV_MODEL,
        }

    def turns(self) -> list[dict[str, object]]:
        text = self.journal.read_text() if self.journal.exists() else ""
        return [json.loads(line) for line in text.splitlines() if line]


@contextmanager
def provider(scenario: str = "happy") -> Iterator[Provider]:
    home = scratch_dir("real-brains-provider-")
    scripts = home / "scripts"
    scripts.mkdir()
    for role in Role:
        data = {**stub_script(load(scenario), role, topic=DEFAULT_TOPIC)}
        data["models"] = MODELS.get(role, [])
        (scripts / f"{role.value}.yaml").write_text(json.dumps(data))
    write_private(
        home / llm_service.KEY_FILE, f"anthropic:pm={ANTHROPIC_KEY}\nopenai={OPENAI_KEY}\n"
    )
    try:
        record, _ = llm_service.up(home, scripts=[scripts])
        yield Provider(record.url, Path(record.requests_file))
    finally:
        llm_service.down(home)
        shutil.rmtree(home, ignore_errors=True)
