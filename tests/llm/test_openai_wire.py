"""The OpenAI Responses and Chat Completions wires, read by the official `openai` SDK."""

from __future__ import annotations

import json
from typing import Any

import openai

from tests.llm.conftest import openai_tool

RESPONSES_ORDER = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
]


def _collapse(types: list[str]) -> list[str]:
    return [t for i, t in enumerate(types) if i == 0 or types[i - 1] != t]


async def test_responses_text_stream(oai: openai.AsyncOpenAI) -> None:
    stream = await oai.responses.create(
        model="stub-architect", input="what do you think?", stream=True
    )
    events = [event async for event in stream]
    assert _collapse([e.type for e in events]) == RESPONSES_ORDER
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == "architect, turn 1"
    completed = events[-1]
    assert completed.type == "response.completed"
    assert completed.response.status == "completed"
    assert completed.response.output_text == "architect, turn 1"
    assert completed.response.usage is not None
    assert completed.response.usage.total_tokens > 0


async def test_responses_function_call_then_function_call_output(oai: openai.AsyncOpenAI) -> None:
    tools: Any = [openai_tool("responses")]
    first = await oai.responses.create(
        model="stub-dev", input="please build search", tools=tools, stream=True
    )
    events = [event async for event in first]
    types = [e.type for e in events]
    assert "response.function_call_arguments.delta" in types
    done = next(e for e in events if e.type == "response.function_call_arguments.done")
    assert json.loads(done.arguments) == {
        "content": "Building search now (turn 1)",
        "mentions": ["pm"],
    }
    (call,) = events[-1].response.output  # type: ignore[union-attr]
    assert call.type == "function_call"
    assert call.name == "band_send_message"
    assert call.call_id.startswith("call_")

    # The second turn, as Codex sends it: the call, then its output.
    second = await oai.responses.create(
        model="stub-dev",
        tools=tools,
        stream=True,
        input=[
            {"role": "user", "content": [{"type": "input_text", "text": "please build search"}]},
            {
                "type": "function_call",
                "call_id": call.call_id,
                "name": call.name,
                "arguments": call.arguments,
            },
            {
                "type": "function_call_output",
                "call_id": call.call_id,
                "output": '{"status": "delivered"}',
            },
        ],
    )
    final = [event async for event in second][-1]
    assert final.type == "response.completed"
    assert final.response.output_text == "Reported back (delivered, turn 2)."


async def test_responses_stream_helper_and_non_streaming(oai: openai.AsyncOpenAI) -> None:
    tools: Any = [openai_tool("responses")]
    async with oai.responses.stream(model="stub-dev", input="build it", tools=tools) as stream:
        async for _event in stream:
            pass
        final = await stream.get_final_response()
    (call,) = final.output
    assert call.type == "function_call"
    assert json.loads(call.arguments)["content"] == "Building it now (turn 1)"

    plain = await oai.responses.create(model="stub-dev", input="nothing to match")
    assert plain.output_text == "dev has nothing scripted for this (turn 2)."
    assert plain.status == "completed"


async def test_chat_stream_with_tool_calls(oai: openai.AsyncOpenAI) -> None:
    tools: Any = [openai_tool("chat")]
    stream = await oai.chat.completions.create(
        model="stub-architect",
        messages=[{"role": "user", "content": "please review the design"}],
        tools=tools,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Reviewing."
    pieces = [call for c in chunks if c.choices for call in (c.choices[0].delta.tool_calls or [])]
    assert pieces[0].id
    assert pieces[0].function
    assert pieces[0].function.name == "band_send_message"
    arguments = "".join(p.function.arguments or "" for p in pieces if p.function)
    assert json.loads(arguments) == {"content": "Looks sound (turn 1)"}
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "tool_calls"
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.total_tokens > 0


async def test_chat_stream_helper_accumulates_tool_calls(oai: openai.AsyncOpenAI) -> None:
    tools: Any = [openai_tool("chat")]
    async with oai.chat.completions.stream(
        model="stub-architect",
        messages=[{"role": "user", "content": "review please"}],
        tools=tools,
    ) as stream:
        async for _event in stream:
            pass
        final = await stream.get_final_completion()
    message = final.choices[0].message
    assert message.content == "Reviewing."
    assert message.tool_calls is not None
    assert json.loads(message.tool_calls[0].function.arguments) == {  # type: ignore[union-attr]
        "content": "Looks sound (turn 1)"
    }


async def test_chat_non_streaming_tool_call_then_tool_message(oai: openai.AsyncOpenAI) -> None:
    tools: Any = [openai_tool("chat")]
    messages: list[Any] = [
        {"role": "system", "content": "You are the architect."},
        {"role": "user", "content": "Review the plan"},
    ]
    first = await oai.chat.completions.create(
        model="stub-architect", messages=messages, tools=tools
    )
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls is not None
    call = choice.message.tool_calls[0]
    assert call.type == "function"
    assert call.function.name == "band_send_message"
    messages += [
        choice.message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "message 42 posted"},
    ]
    second = await oai.chat.completions.create(
        model="stub-architect", messages=messages, tools=tools
    )
    assert second.choices[0].finish_reason == "stop"
    assert second.choices[0].message.content == "Review posted: message 42 posted"
    assert second.usage is not None
    assert second.usage.prompt_tokens > 0


async def test_models_list_in_the_openai_shape(oai: openai.AsyncOpenAI) -> None:
    names = [model.id async for model in oai.models.list()]
    assert {"pm", "stub-pm", "dev", "architect", "stub-architect"} <= set(names)
