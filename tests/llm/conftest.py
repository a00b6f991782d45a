"""Fixtures: an in-process LLM stub per test (the scripts in tests/llm/scripts, canary keys)
and the official Anthropic and OpenAI async clients pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest_asyncio

from bandkit.llm.keys import KeyRing
from bandkit.llm.script import ScriptSet, load_scripts
from bandkit.llm.server import LLMStub
from bandkit.llm.state import StubConfig

SCRIPTS = Path(__file__).parent / "scripts"
# Canary keys: tests grep logs and pages for them.
ANTHROPIC_KEY = "sk-ant-canary-3b7c41d09e"
OPENAI_KEY = "sk-canary-openai-8d2f6a51"
DEV_KEY = "sk-canary-dev-bound-c4e19f"  # openai:dev, selects the dev script
KEYS = f"anthropic={ANTHROPIC_KEY}\nopenai={OPENAI_KEY}\nopenai:dev={DEV_KEY}\n"
SEND = {
    "name": "band_send_message",
    "description": "Send a message to the room",
    "input_schema": {
        "type": "object",
        "properties": {"content": {"type": "string"}, "mentions": {"type": "array"}},
        "required": ["content"],
    },
}

StartStub = Callable[..., Any]


@pytest_asyncio.fixture
async def start_stub(tmp_path: Path) -> AsyncIterator[StartStub]:
    """Factory: `await start_stub(scripts=, keys=, **StubConfig fields)`; all stopped after."""
    running: list[LLMStub] = []

    async def start(
        scripts: ScriptSet | None = None, keys: str = KEYS, **overrides: Any
    ) -> LLMStub:
        overrides.setdefault("log_file", tmp_path / "requests.jsonl")
        stub = LLMStub(
            StubConfig(**overrides),
            scripts=scripts or load_scripts([SCRIPTS]),
            keys=KeyRing.parse(keys, "test keys"),
        )
        await stub.startup()
        running.append(stub)
        return stub

    yield start
    for stub in running:
        await stub.shutdown(2.0)


@pytest_asyncio.fixture
async def stub(start_stub: StartStub) -> LLMStub:
    started: LLMStub = await start_stub()
    return started


@pytest_asyncio.fixture
async def claude(stub: LLMStub) -> AsyncIterator[anthropic.AsyncAnthropic]:
    async with anthropic.AsyncAnthropic(
        base_url=stub.url, api_key=ANTHROPIC_KEY, max_retries=0, timeout=10
    ) as client:
        yield client


@pytest_asyncio.fixture
async def oai(stub: LLMStub) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(
        base_url=f"{stub.url}/v1", api_key=OPENAI_KEY, max_retries=0, timeout=10
    ) as client:
        yield client


def openai_tool(flavour: str) -> dict[str, Any]:
    """SEND as an OpenAI tool: `responses` (flat) or `chat` (nested under `function`)."""
    function = {
        "name": SEND["name"],
        "description": SEND["description"],
        "parameters": SEND["input_schema"],
    }
    if flavour == "responses":
        return {"type": "function", **function}
    return {"type": "function", "function": function}
