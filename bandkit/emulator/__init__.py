"""A local Band platform the real band-sdk talks to over real HTTP and WebSocket.

Flow of a request: `server.Emulator` (lifecycle: bind, uvicorn, signals, shutdown) →
`access` (the Host guard on every route, page logins, feed limits) →
`server.build_app` (Starlette routes) → `api.endpoint` (auth, pause gate, error shape) →
`rest_human` / `rest_bulk` / `rest_agent` / `rest_agent_rooms` / `control` handlers, and
the agent features `rest_memories` (+ `rest_human_memories`), `rest_tasks`
(`tasks_model`), `rest_files`, `rest_contacts` → `ops` / `messages` / `tasks_model`
(validate and mutate `state.EmulatorState`, return `Push`es) → `context.Platform.commit`
→ `channels.Broker` (Phoenix V2 fan-out with join refs, live page feeds) and
`persistence.Saver` (atomic state file). `ws_endpoint` handles the WebSocket upgrade;
`pages` the live room pages; `tls` the local CA; `wire` renders every JSON shape;
`cli` is `python -m bandkit.emulator`; `service` runs it in the background for
`invoke platform.*`.

Importing this package loads nothing: import `bandkit.emulator.server` for `Emulator`.
"""
