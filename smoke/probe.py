"""The smoke's probes: provision, a marker round trip per label, cleanup.

Labels (`smoke.state.Label`): `provision` makes a fresh agent and room for the run,
`initial` and the `after-*` labels prove a round trip, `cleanup` reaps what the run made.

- **Provision** (`provision`, in `smoke.provision`): each id is saved to the state before
  the next fallible step: the sandbox and agent names first, the agent id as soon as the
  kit registered it (read from the provisioning manifest when a later step failed), the
  room id ("Sandbox smoke — <run_id>") once created; adding the agent to the room is its
  own step; then the agent must be online in that room.
- **Round trip** (`probe`, here; the human side in `smoke.roundtrip`): a human WebSocket
  observer (the SDK's own `WebSocketClient` with the user key) joins the room; a mention
  carrying `marker:<token>` (12 hex) is sent over REST; the probe passes when the
  observer sees the agent's `sandbox-ack:<token>`. The REST message list is polled as a
  fallback every `FALLBACK_POLL_S` (a reply the observer missed, e.g. while its own
  socket reconnects); the detail says which one saw the reply.
- **Cleanup** (`cleanup`, in `smoke.cleanup`): deletes the run's room, unprovisions the
  sandbox (sandbox, stored key, platform agent, manifest), reaps ids carried over from
  earlier runs and removes the workspace copy. A reap that fails keeps its id in the
  state for a retry.

Every probe is appended to the state (a retry appends another attempt) before it
returns; a failed one raises `ProbeFailed` after recording (`smoke.outcome`), so the
task exits 1.
"""

from __future__ import annotations

from smoke.context import Recorder
from smoke.outcome import fail, passed, reason
from smoke.roundtrip import REPLY_TIMEOUT_S, Ack, round_trip, run_async
from smoke.state import Label
from smoke.target import Target


def probe(
    rec: Recorder, target: Target, label: Label, *, timeout_s: float = REPLY_TIMEOUT_S
) -> Ack:
    """One round trip recorded under `label`; ProbeFailed (after recording) on failure."""
    state = rec.state
    if not (state.agent_id and state.room_id):
        raise fail(rec, label, "", "the run has no agent and room; run the provision probe first")
    try:
        ack = run_async(
            lambda: round_trip(
                target, state.room_id, state.agent_id, state.agent_name, timeout_s=timeout_s
            )
        )
    except TimeoutError as exc:
        raise fail(rec, label, "", f"agent {state.agent_id}: {exc}") from None
    except Exception as exc:
        raise fail(rec, label, "", f"the round trip failed: {reason(exc)}") from None
    passed(rec, label, ack.token, ack.describe("reply"))
    return ack
