"""The Anthropic Messages wire, read by the official `anthropic` SDK: streams, tool_use."""

from __future__ import annotations

from typing import Any

import anthropic

from tests.llm.conftest import SEND

MCP_SEND = {**SEND, "name": "mcp__band__band_send_message"}
HELLO = [{"role": "user", "content": "hello there"}]
STREAM_ORDER = [
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
]


def _collapse(types: list[str]) -> list[str]:
    """Event types with runs of the same type collapsed to one."""
    return [t for i, t in enumerate(types) if i == 0 or types[i - 1] != t]


async def test_raw_text_stream_has_every_event_and_reassembles(
    claude: anthropic.AsyncAnthropic,
) -> None:
    stream = await claude.messages.create(
        model="stub-pm", max_tokens=256, messages=HELLO, stream=True
    )
    events = [event async for event in stream]
    types = [e.type for e in events]
    assert _collapse(types) == STREAM_ORDER
    deltas = [e.delta for e in events if e.type == "content_block_delta"]
    assert len(deltas) > 2, "the text arrives in pieces"
    text = "".join(d.text for d in deltas if d.type == "text_delta")
    assert text.startswith("Hello from pm, turn 1. This reply is long enough")
    assert events[0].message.model == "stub-pm"
    assert events[-2].delta.stop_reason == "end_turn"


async def test_stream_helper_builds_text_and_mcp_tool_use(
    claude: anthropic.AsyncAnthropic,
) -> None:
    async with claude.messages.stream(
        model="stub-pm",
        max_tokens=256,
        tools=[MCP_SEND],  # type: ignore[list-item]
        messages=[{"role": "user", "content": "@pm please plan search"}],
    ) as stream:
        seen = [event.type async for event in stream]
        final = await stream.get_final_message()
    assert "input_json" in seen  # the helper's own event for input_json_delta
    assert final.stop_reason == "tool_use"
    text, tool = final.content
    assert text.type == "text"
    assert text.text == "Planning search."
    assert tool.type == "tool_use"
    assert tool.name == "mcp__band__band_send_message"  # the offered name, suffix-matched
    assert tool.input == {"content": "@dev please build search (turn 1)", "mentions": ["dev"]}
    assert tool.id.startswith("toolu_")


async def test_non_streaming_tool_use_then_tool_result_turn(
    claude: anthropic.AsyncAnthropic,
) -> None:
    first = await claude.messages.create(
        model="stub-pm",
        max_tokens=256,
        tools=[SEND],  # type: ignore[list-item]
        messages=[{"role": "user", "content": "plan billing"}],
    )
    assert first.stop_reason == "tool_use"
    tool = first.content[-1]
    assert tool.type == "tool_use"
    assert tool.name == "band_send_message"
    assert tool.input == {"content": "@dev please build billing (turn 1)", "mentions": ["dev"]}
    history: list[Any] = [
        {"role": "user", "content": "plan billing"},
        {"role": "assistant", "content": [block.model_dump() for block in first.content]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": tool.id, "content": '{"status": "sent"}'}
            ],
        },
    ]
    second = await claude.messages.create(
        model="stub-pm",
        max_tokens=256,
        tools=[SEND],  # type: ignore[list-item]
        messages=history,
    )
    assert second.stop_reason == "end_turn"
    assert [b.type for b in second.content] == ["text"]
    assert second.content[0].text == "Sent (turn 2)."  # type: ignore[union-attr]
    assert second.usage.output_tokens >= 1


async def test_streamed_second_turn_after_tool_result(
    claude: anthropic.AsyncAnthropic,
) -> None:
    history: list[Any] = [
        {"role": "user", "content": "plan search"},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": MCP_SEND["name"],
                    "input": {"content": "x"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "text", "text": "ok"}],
                },
                {"type": "text", "text": "<system-reminder>not a room message</system-reminder>"},
            ],
        },
    ]
    async with claude.messages.stream(
        model="stub-pm",
        max_tokens=64,
        tools=[MCP_SEND],
        messages=history,  # type: ignore[list-item]
    ) as stream:
        final = await stream.get_final_message()
    assert final.content[0].text == "Sent (turn 1)."  # type: ignore[union-attr]


async def test_count_tokens_and_models(claude: anthropic.AsyncAnthropic) -> None:
    counted = await claude.messages.count_tokens(model="stub-pm", messages=HELLO)
    assert counted.input_tokens >= 1
    names = [model.id async for model in claude.models.list()]
    assert {"pm", "stub-pm", "dev", "stub-dev", "architect"} <= set(names)


async def test_beta_messages_stream_as_the_claude_cli_calls_it(
    claude: anthropic.AsyncAnthropic,
) -> None:
    """`POST /v1/messages?beta=true` with beta headers and adaptive thinking: the CLI's call."""
    async with claude.beta.messages.stream(
        model="stub-pm",
        max_tokens=256,
        tools=[MCP_SEND],  # type: ignore[list-item]
        messages=[{"role": "user", "content": "plan onboarding"}],
        betas=["interleaved-thinking-2025-05-14"],
        extra_body={"thinking": {"type": "adaptive"}},
    ) as stream:
        final = await stream.get_final_message()
    assert final.content[1].type == "tool_use"
    assert final.content[1].input["content"] == "@dev please build onboarding (turn 1)"  # type: ignore[union-attr,index]
