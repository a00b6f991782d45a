"""Bench helper: several real `band.Agent` echo agents in one process.

Run with the echo-agent workspace's own interpreter (it imports only band-sdk and the
stdlib): `python emulator_swarm.py CREDENTIALS_JSON`. The file (0600, written by the
bench) holds `{"rest_url", "ws_url", "agents": [{"id", "key"}, ...]}`; keys never go
through argv. Prints `ready <n>` once every agent has started; stops on SIGTERM.
The echo behaviour is the starter's: reply "echo: <text>" mentioning the sender.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Any

from band import Agent
from band.core.simple_adapter import SimpleAdapter


class EchoAdapter(SimpleAdapter[object]):
    async def on_message(
        self,
        msg: Any,
        tools: Any,
        history: object,
        participants_msg: str | None,
        contacts_msg: str | None,
        *,
        is_session_bootstrap: bool,
        room_id: str,
    ) -> None:
        await tools.send_message(f"echo: {msg.content}", mentions=[msg.sender_id])


async def serve(spec: dict[str, Any]) -> None:
    agents = [
        Agent.create(
            adapter=EchoAdapter(),
            agent_id=entry["id"],
            api_key=entry["key"],
            rest_url=spec["rest_url"],
            ws_url=spec["ws_url"],
        )
        for entry in spec["agents"]
    ]
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await asyncio.gather(*(agent.start() for agent in agents))
    print(f"ready {len(agents)}", flush=True)
    await stop.wait()
    await asyncio.gather(*(agent.stop(timeout=5) for agent in agents), return_exceptions=True)


def main() -> int:
    spec = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    asyncio.run(serve(spec))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
