"""The stub's behaviour around the wire: custody (keys), errors, the journal, the pages."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from bandkit.llm.pages import OPERATOR_HEADER
from bandkit.llm.server import LLMStub
from tests.llm.conftest import ANTHROPIC_KEY, DEV_KEY, OPENAI_KEY, SEND, StartStub, openai_tool

PLACEHOLDERS = ["proxy-managed", "sk-ant-api03-placeholder", "sk-placeholder"]
HELLO: Any = [{"role": "user", "content": "hello"}]


def _anthropic(stub: LLMStub, key: str | None) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(base_url=stub.url, api_key=key, max_retries=0, timeout=5)


def _openai(stub: LLMStub, key: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{stub.url}/v1", api_key=key, max_retries=0, timeout=5)


def _operator(stub: LLMStub) -> dict[str, str]:
    """The header the operator's own tools (`invoke llm.status`) send to the pages."""
    return {OPERATOR_HEADER: stub.stub.operator_key}


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# --- custody ----------------------------------------------------------------------------


@pytest.mark.parametrize("key", [*PLACEHOLDERS, "sk-ant-some-other-key", OPENAI_KEY])
async def test_anthropic_refuses_a_placeholder_or_wrong_key_with_its_401(
    stub: LLMStub, key: str
) -> None:
    async with _anthropic(stub, key) as client:
        with pytest.raises(anthropic.AuthenticationError) as caught:
            await client.messages.create(model="stub-pm", max_tokens=8, messages=HELLO)
    body = caught.value.body
    assert isinstance(body, dict)
    assert body["type"] == "error"
    assert body["error"]["type"] == "authentication_error"
    if key in PLACEHOLDERS:
        assert "placeholder" in body["error"]["message"]
    else:
        assert body["error"]["message"] == "invalid x-api-key"
    assert caught.value.status_code == 401


@pytest.mark.parametrize("key", [*PLACEHOLDERS, "sk-proj-not-ours", ANTHROPIC_KEY])
async def test_openai_refuses_a_placeholder_or_wrong_key_with_its_401(
    stub: LLMStub, key: str
) -> None:
    async with _openai(stub, key) as client:
        with pytest.raises(openai.AuthenticationError) as caught:
            await client.responses.create(model="stub-dev", input="hi")
        with pytest.raises(openai.AuthenticationError):
            await client.chat.completions.create(model="stub-dev", messages=HELLO)
    body = caught.value.body
    assert isinstance(body, dict)
    assert set(body) == {"message", "type", "param", "code"}  # the SDK unwraps "error"
    assert body["code"] == "invalid_api_key"
    assert caught.value.status_code == 401


async def test_missing_keys_and_the_custody_log_line(
    stub: LLMStub, caplog: pytest.LogCaptureFixture
) -> None:
    async with httpx.AsyncClient(base_url=stub.url, timeout=5) as http:
        bare = await http.post("/v1/messages", json={"model": "stub-pm"})
        assert bare.status_code == 401
        assert bare.json()["error"] == {
            "type": "authentication_error",
            "message": "x-api-key header is required",
        }
        assert bare.headers["request-id"] == bare.json()["request_id"]
        none = await http.post("/v1/chat/completions", json={})
        assert none.status_code == 401
        assert none.json()["error"]["message"].startswith("You didn't provide an API key")
        with caplog.at_level("WARNING", logger="bandkit.llm"):
            await http.post(
                "/v1/responses", json={}, headers={"authorization": "Bearer proxy-managed"}
            )
    assert any(r.message.startswith("CUSTODY openai.responses") for r in caplog.records)


async def test_the_canaries_are_accepted_in_every_header_form(stub: LLMStub) -> None:
    async with _anthropic(stub, ANTHROPIC_KEY) as client:  # x-api-key
        reply = await client.messages.create(model="stub-pm", max_tokens=8, messages=HELLO)
        assert reply.content[0].type == "text"
    async with anthropic.AsyncAnthropic(  # Authorization: Bearer (ANTHROPIC_AUTH_TOKEN)
        base_url=stub.url, auth_token=ANTHROPIC_KEY, max_retries=0, timeout=5
    ) as client:
        reply = await client.messages.create(model="stub-pm", max_tokens=8, messages=HELLO)
        assert reply.content[0].type == "text"


async def test_a_key_bound_to_an_agent_selects_its_script(stub: LLMStub) -> None:
    async with _openai(stub, DEV_KEY) as client:
        reply = await client.responses.create(model="gpt-whatever", input="hi")
    assert reply.output_text == "dev has nothing scripted for this (turn 1)."
    turn = stub.stub.journal.turns()[-1]
    assert (turn["agent"], turn["selected_by"]) == ("dev", "key")


async def test_the_agent_header_wins(stub: LLMStub) -> None:
    async with _openai(stub, OPENAI_KEY) as client:
        reply = await client.responses.create(
            model="stub-pm", input="hi", extra_headers={"X-Stub-Agent": "architect"}
        )
    assert reply.output_text == "architect, turn 1"


# --- errors: the provider's shape, never a hang -----------------------------------------


async def test_unscripted_input_gets_the_provider_error_fast(
    stub: LLMStub, caplog: pytest.LogCaptureFixture
) -> None:
    """pm has no default: a message no rule matches is a 400 in each shape, at once."""
    async with asyncio.timeout(5):
        async with _anthropic(stub, ANTHROPIC_KEY) as client:
            with (
                caplog.at_level("WARNING", logger="bandkit.llm"),
                pytest.raises(anthropic.BadRequestError) as caught,
            ):
                await client.messages.create(
                    model="stub-pm",
                    max_tokens=8,
                    stream=True,
                    messages=[{"role": "user", "content": "what is the weather"}],
                )
        error = caught.value.body["error"]  # type: ignore[index]
        assert error["type"] == "invalid_request_error"
        assert "agent 'pm' has no rule for this request and no default" in error["message"]
        assert "what is the weather" in error["message"]
        async with _openai(stub, OPENAI_KEY) as client:
            with pytest.raises(openai.BadRequestError) as oai_caught:
                await client.chat.completions.create(
                    model="stub-pm",
                    messages=[{"role": "user", "content": "weather?"}],
                    stream=True,
                )
        assert oai_caught.value.code == "stub_unscripted"
        assert oai_caught.value.type == "invalid_request_error"
    assert any("UNSCRIPTED" in r.getMessage() for r in caplog.records)


async def test_an_unknown_model_with_several_scripts_is_model_not_found(stub: LLMStub) -> None:
    async with _openai(stub, OPENAI_KEY) as client:
        with pytest.raises(openai.NotFoundError) as caught:
            await client.responses.create(model="gpt-9", input="hi")
    assert caught.value.code == "model_not_found"
    assert "loaded agents: architect, dev, pm" in caught.value.message
    async with _anthropic(stub, ANTHROPIC_KEY) as claude:
        with pytest.raises(anthropic.NotFoundError) as a_caught:
            await claude.messages.create(
                model="claude-sonnet-5-5",
                max_tokens=8,
                messages=HELLO,
                extra_headers={"X-Stub-Agent": "nobody"},
            )
    assert a_caught.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]


@pytest.mark.parametrize(
    ("path", "key", "body", "field"),
    [
        ("/v1/messages", ANTHROPIC_KEY, b"{not json", "not valid JSON"),
        ("/v1/messages", ANTHROPIC_KEY, b"[1]", "must be a JSON object"),
        ("/v1/messages", ANTHROPIC_KEY, b'{"model": "stub-pm", "messages": []}', "max_tokens"),
        (
            "/v1/messages",
            ANTHROPIC_KEY,
            b'{"model": "stub-pm", "max_tokens": 5, "messages": [{"role": "bot"}]}',
            "role",
        ),
        ("/v1/responses", OPENAI_KEY, b'{"model": "stub-dev"}', "input: Field required"),
        (
            "/v1/responses",
            OPENAI_KEY,
            b'{"model": "stub-dev", "input": [{"type": "function_call_output"}]}',
            "call_id",
        ),
        ("/v1/chat/completions", OPENAI_KEY, b'{"messages": []}', "model: Field required"),
        (
            "/v1/chat/completions",
            OPENAI_KEY,
            b'{"model": "x", "messages": [{"role": "x"}]}',
            "messages[0].role",
        ),
    ],
)
async def test_bad_input_gets_400_in_the_provider_shape(
    stub: LLMStub, path: str, key: str, body: bytes, field: str
) -> None:
    headers = {"x-api-key": key} if "messages" in path[:13] else {"authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=stub.url, timeout=5) as http:
        answer = await http.post(path, content=body, headers=headers)
    assert answer.status_code == 400
    data = answer.json()
    if path == "/v1/messages":
        assert data["type"] == "error"
        assert data["error"]["type"] == "invalid_request_error"
        assert field in data["error"]["message"]
    else:
        assert set(data["error"]) == {"message", "type", "param", "code"}
        assert data["error"]["type"] == "invalid_request_error"
        assert field in data["error"]["message"] or field == data["error"]["param"]


async def test_unknown_routes_methods_and_big_bodies(stub: LLMStub, start_stub: StartStub) -> None:
    async with httpx.AsyncClient(base_url=stub.url, timeout=5) as http:
        missing = await http.post("/v1/embeddings", json={})
        assert missing.status_code == 404
        assert missing.json()["error"]["message"] == "Invalid URL (POST /v1/embeddings)"
        wrong = await http.get("/v1/messages")
        assert wrong.status_code == 405
        assert wrong.json()["type"] == "error"
    small = await start_stub(max_body=1000, log_file=None)
    async with httpx.AsyncClient(base_url=small.url, timeout=5) as http:
        too_big = await http.post("/v1/messages", content=b"x" * 2000)
        assert too_big.status_code == 413
        assert too_big.json()["error"]["type"] == "request_too_large"

        async def chunked() -> AsyncIterator[bytes]:
            for _ in range(3):
                yield b"y" * 600

        streamed = await http.post("/v1/chat/completions", content=chunked())
        assert streamed.status_code == 413


# --- journal and pages -------------------------------------------------------------------


async def test_jsonl_log_redacts_every_key(stub: LLMStub, tmp_path: Path) -> None:
    leak = f"my key is {ANTHROPIC_KEY} and {OPENAI_KEY}"
    async with _anthropic(stub, ANTHROPIC_KEY) as claude:
        await claude.messages.create(
            model="stub-pm",
            max_tokens=8,
            messages=[{"role": "user", "content": f"hello, {leak}"}],
        )
    async with _openai(stub, DEV_KEY) as client:
        await client.responses.create(
            model="stub-dev", input=f"build x {leak}", tools=[openai_tool("responses")]
        )  # type: ignore[list-item]
    async with _openai(stub, "sk-real-looking-but-wrong") as client:
        with pytest.raises(openai.AuthenticationError):
            await client.responses.create(model="stub-dev", input="x")
    async with httpx.AsyncClient(base_url=stub.url, timeout=5) as http:
        raw = await http.post(
            "/v1/messages",
            json={"model": "stub-pm", "max_tokens": 8, "messages": HELLO},
            headers={"x-api-key": ANTHROPIC_KEY, "cookie": "session=abc"},
        )
        assert raw.status_code == 200
    log_file = tmp_path / "requests.jsonl"
    text = log_file.read_text()
    for secret in (ANTHROPIC_KEY, OPENAI_KEY, DEV_KEY, "sk-real-looking-but-wrong"):
        assert secret not in text
    lines = _lines(log_file)
    assert [line["status"] for line in lines] == [200, 200, 401, 200]
    assert lines[0]["headers"]["authorization"] == "***"  # the SDK sends Bearer
    assert lines[1]["headers"]["authorization"] == "***"
    assert lines[2]["headers"]["authorization"] == "***"  # a wrong key is masked too
    assert lines[3]["headers"]["x-api-key"] == "***"
    assert lines[3]["headers"]["cookie"] == "***"
    assert "my key is *** and ***" in lines[0]["body"]["messages"][0]["content"]
    assert lines[0]["rule"] == "hello"
    assert lines[1]["reply"]["tool"] == "band_send_message"
    assert oct(log_file.stat().st_mode & 0o777) == "0o600"
    async with httpx.AsyncClient(base_url=stub.url, timeout=5, headers=_operator(stub)) as http:
        turns = (await http.get("/_stub/turns")).text
    assert ANTHROPIC_KEY not in turns
    assert OPENAI_KEY not in turns


async def test_turns_show_each_agents_requests_with_timings(stub: LLMStub) -> None:
    async with _anthropic(stub, ANTHROPIC_KEY) as claude:
        async with claude.messages.stream(
            model="stub-pm", max_tokens=8, messages=HELLO, tools=[SEND]
        ) as s:  # type: ignore[list-item]
            await s.get_final_message()
        await claude.messages.create(model="stub-pm", max_tokens=8, messages=HELLO)
    async with _openai(stub, OPENAI_KEY) as client:
        await client.chat.completions.create(model="stub-architect", messages=HELLO)
    async with httpx.AsyncClient(base_url=stub.url, timeout=5, headers=_operator(stub)) as http:
        data = (await http.get("/_stub/turns")).json()
        pm_only = (await http.get("/_stub/turns", params={"agent": "pm", "since": 1})).json()
        page = await http.get("/")
        script = await http.get("/_stub/page.js")
        health = (await http.get("/_stub/health")).json()
    assert data["count"] == 3
    streamed, plain, chat = data["turns"]
    assert (streamed["agent"], streamed["turn"], streamed["stream"]) == ("pm", 1, True)
    assert (plain["agent"], plain["turn"], plain["stream"]) == ("pm", 2, False)
    assert chat["api"] == "openai.chat"
    assert chat["agent"] == "architect"
    assert 0 < streamed["ms_first"] <= streamed["ms_last"] < 5000
    assert streamed["request"]["message"] == "hello"
    assert streamed["request"]["tools_offered"] == ["band_send_message"]
    assert data["agents"]["pm"]["requests"] == 2
    assert data["agents"]["pm"]["p50_ms"] > 0
    assert data["agents"]["dev"]["requests"] == 0
    assert [t["seq"] for t in pm_only["turns"]] == [2]
    assert page.status_code == 200
    assert "/_stub/page.js" in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert "textContent" in script.text
    assert "innerHTML" not in script.text
    assert health["status"] == "ok"
    assert health["requests"] == 3


async def test_pages_refuse_a_foreign_host_name(stub: LLMStub) -> None:
    """A DNS-rebinding page names its own host: the turns stay unreadable to it, even
    with the operator's credential."""
    async with httpx.AsyncClient(base_url=stub.url, timeout=5, headers=_operator(stub)) as http:
        for path in ("/", "/_stub/turns", "/_stub/health", "/login"):
            refused = await http.get(path, headers={"host": "evil.example:80"})
            assert refused.status_code == 403
        assert (await http.get("/_stub/turns", headers={"host": "localhost"})).status_code == 200


# --- the pages take the operator, never "a loopback client" ---------------------------

PROMPT = "the secret plan of box B: 7f3e91c2"
OWN_PAGES = ("/", "/_stub/turns", "/_stub/health", "/_stub/page.js", "/_stub/page.css")


async def _a_turn_with_a_prompt(stub: LLMStub) -> None:
    async with _anthropic(stub, ANTHROPIC_KEY) as claude:
        message: Any = [{"role": "user", "content": PROMPT}]
        with pytest.raises(anthropic.APIStatusError):  # unscripted: refused, still a turn
            await claude.messages.create(model="stub-pm", max_tokens=8, messages=message)
    assert stub.stub.journal.count == 1


@pytest.mark.parametrize(
    "headers",
    [{}, {OPERATOR_HEADER: "not-the-operator-key"}, {"x-api-key": ANTHROPIC_KEY}],
    ids=["nothing", "wrong-operator-key", "an-agent-key"],
)
async def test_a_loopback_client_without_the_operator_credential_reads_nothing(
    stub: LLMStub, headers: dict[str, str]
) -> None:
    """Every box's credential proxy is a loopback client naming a local Host: the old
    "loopback only" rule let any of them read every box's prompts at /_stub/turns."""
    await _a_turn_with_a_prompt(stub)
    async with httpx.AsyncClient(base_url=stub.url, timeout=5, headers=headers) as http:
        for path in OWN_PAGES:
            refused = await http.get(path)
            assert refused.status_code == 401, path
            assert PROMPT not in refused.text
            assert "7f3e91c2" not in refused.text
        page = await http.get("/")
        assert "login link" in page.text  # the page says how to sign in
        minted = await http.post("/_stub/login-link")
        assert minted.status_code == 401
    async with httpx.AsyncClient(base_url=stub.url, timeout=5, headers=_operator(stub)) as http:
        assert PROMPT[:40] in (await http.get("/_stub/turns")).text  # the operator sees it


async def test_a_login_link_signs_a_browser_in_once(stub: LLMStub, tmp_path: Path) -> None:
    await _a_turn_with_a_prompt(stub)
    async with httpx.AsyncClient(base_url=stub.url, timeout=5, headers=_operator(stub)) as http:
        minted = await http.post("/_stub/login-link")
    assert minted.status_code == 201
    url = minted.json()["url"]
    assert url.startswith(f"{stub.url}/login#token=")
    token = url.split("#token=", 1)[1]
    async with httpx.AsyncClient(base_url=stub.url, timeout=5) as browser:
        login = await browser.get("/login")
        assert login.status_code == 200
        assert "form-action 'self'" in login.headers["content-security-policy"]
        assert "/_stub/login.js" in login.text
        script = await browser.get("/_stub/login.js")
        assert "location.hash" in script.text
        assert "innerHTML" not in script.text
        signed = await browser.post("/login", data={"token": token})
        assert signed.status_code == 303
        cookie = signed.headers["set-cookie"]
        assert "HttpOnly" in cookie
        assert "SameSite=Strict" in cookie
        assert cookie.startswith(stub.stub.pages.cookie_name + "=")
        turns = await browser.get("/_stub/turns")  # the session cookie, no key
        assert turns.status_code == 200
        assert PROMPT[:40] in turns.text
        assert (await browser.get("/")).status_code == 200
    async with httpx.AsyncClient(base_url=stub.url, timeout=5) as other:
        again = await other.post("/login", data={"token": token})
        assert again.status_code == 401  # used up
        assert (await other.get("/_stub/turns")).status_code == 401
    logged = (tmp_path / "requests.jsonl").read_text()
    for secret in (token, stub.stub.operator_key):
        assert secret not in logged
