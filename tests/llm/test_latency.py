"""Per-request latency, request in → last stream event, p50 over 50 requests per wire API.

The stub times each request itself (`ms_last` on /_stub/turns: from the request's arrival
to the moment its last event was sent). Run with `-s` to see the numbers.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import anthropic
import openai

from bandkit.llm.server import LLMStub
from tests.llm.conftest import SEND, openai_tool

N = 50
P50_CEILING_MS = 250.0  # generous: the suite shares the machine with everything else


async def test_p50_per_wire_api(
    stub: LLMStub, claude: anthropic.AsyncAnthropic, oai: openai.AsyncOpenAI
) -> None:
    tools_chat: Any = [openai_tool("chat")]
    tools_responses: Any = [openai_tool("responses")]
    client_ms: dict[str, list[float]] = {}

    async def timed(api: str, call: Any) -> None:
        started = time.perf_counter()
        await call()
        client_ms.setdefault(api, []).append((time.perf_counter() - started) * 1000)

    async def messages() -> None:
        async with claude.messages.stream(
            model="stub-pm",
            max_tokens=64,
            tools=[SEND],  # type: ignore[list-item]
            messages=[{"role": "user", "content": "plan search"}],
        ) as stream:
            await stream.get_final_message()

    async def responses() -> None:
        stream = await oai.responses.create(
            model="stub-dev", input="build search", tools=tools_responses, stream=True
        )
        async for _event in stream:
            pass

    async def chat() -> None:
        stream = await oai.chat.completions.create(
            model="stub-architect",
            messages=[{"role": "user", "content": "review it"}],
            tools=tools_chat,
            stream=True,
        )
        async for _chunk in stream:
            pass

    for _ in range(N):
        await timed("anthropic.messages", messages)
        await timed("openai.responses", responses)
        await timed("openai.chat", chat)

    server_ms: dict[str, list[float]] = {}
    for turn in stub.stub.journal.turns():
        assert turn["status"] == 200
        assert turn["stream"] is True
        server_ms.setdefault(turn["api"], []).append(turn["ms_last"])
    print()
    for api in ("anthropic.messages", "openai.responses", "openai.chat"):
        assert len(server_ms[api]) == N
        p50 = statistics.median(server_ms[api])
        print(
            f"{api}: stub p50 {p50:.2f} ms (max {max(server_ms[api]):.2f}), "
            f"client round trip p50 {statistics.median(client_ms[api]):.2f} ms over {N}"
        )
        assert p50 < P50_CEILING_MS, f"{api} p50 {p50:.1f} ms"
