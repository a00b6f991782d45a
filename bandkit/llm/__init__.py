"""A local LLM stub: the Anthropic and OpenAI wire APIs on 127.0.0.1, answered from scripts.

For developing agents offline (Claude SDK / claude CLI, Codex, CrewAI, or any client of
the official SDKs): point the client's base URL at the stub and give it the stub's key.

Wire APIs: Anthropic `POST /v1/messages` (SSE or JSON, text and `tool_use`) and
`/v1/messages/count_tokens`; OpenAI `POST /v1/responses` (SSE or JSON, text and
`function_call`; `function_call_output` items are the tool results) and
`POST /v1/chat/completions` (chunks or JSON, `tool_calls`, `[DONE]`); `GET /v1/models`
in the Anthropic shape when the request has `x-api-key` or `anthropic-version`, else in
the OpenAI shape. Errors are always the provider's own shape.

Script selection, per request, the first that applies:
1. the `X-Stub-Agent` header names the agent;
2. the API key is one bound to an agent in the key file (`anthropic:pm=KEY`);
3. the model name is in a script's `models`, or is an agent's name;
4. only one script is loaded.
Otherwise the request gets a 404 (`model_not_found`) in the provider's shape.

Flow: `server.LLMStub` (bind, uvicorn, signals, bounded shutdown) → `routes.build_app`
(the routes; `/_stub/*` and the page for the operator only: the operator key or a
login link's session, see `pages`) → `pipeline.answer` (body, `keys`
custody check, the wire module's `conversation`, `script.ScriptSet.select`,
`script.Script.decide`, the wire module's JSON or SSE frames; refusals in the provider's
error shape from `refusals`) → `state.Stub.finish` → `journal` (JSONL, redacted;
`/_stub/turns`, the page in `pages`). `cli` is `python -m bandkit.llm`; `service` runs
it in the background for `invoke llm.*`. The script schema is in `script`; the key file
format in `keys`; `StubConfig` and what the routes share in `state`.
"""
