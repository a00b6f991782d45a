"""The delivery-attempt cap: a failing message is handed out at most N times, then it is
failed for good (the emulator's choice; whether the real platform caps is unverified)."""

from __future__ import annotations

from pathlib import Path

import pytest
from band.client.rest import AsyncRestClient
from band_rest.errors import UnprocessableEntityError

from bandkit.emulator import rest_files
from bandkit.emulator.messages import MAX_DELIVERY_ATTEMPTS
from bandkit.emulator.server import Emulator
from tests.emulator.conftest import StartEmulator
from tests.emulator.support import REPO_ROOT, human_client, mention, seat

pytestmark = pytest.mark.usefixtures("no_unhandled")


async def test_a_failing_message_is_handed_out_at_most_n_times(
    emu: Emulator, human: AsyncRestClient
) -> None:
    dev = await seat(emu.rest_url, human, "Dev")
    failing = await mention(human, dev.room, dev.agent, "always fails")
    api = dev.rest.agent_api_messages
    for attempt in range(1, MAX_DELIVERY_ATTEMPTS + 1):
        served = await api.get_agent_next_message(chat_id=dev.room)
        assert served is not None
        assert served.data.id == failing, attempt
        claimed = await api.mark_agent_message_processing(chat_id=dev.room, id=failing)
        assert claimed is not None
        assert claimed.data.attempt_number == attempt
        await api.mark_agent_message_failed(chat_id=dev.room, id=failing, error=f"boom {attempt}")
    assert await api.get_agent_next_message(chat_id=dev.room) is None  # 204: nothing pending
    with pytest.raises(UnprocessableEntityError):
        await api.mark_agent_message_processing(chat_id=dev.room, id=failing)
    outstanding = await api.list_agent_messages(chat_id=dev.room)
    assert outstanding.data == []
    failed = await api.list_agent_messages(chat_id=dev.room, status="failed")
    assert [m.id for m in failed.data] == [failing]
    later = await mention(human, dev.room, dev.agent, "works")  # the queue moves on
    served = await api.get_agent_next_message(chat_id=dev.room)
    assert served is not None
    assert served.data.id == later


async def test_an_agent_dying_on_its_last_attempt_is_given_up_at_the_next_claim(
    emu: Emulator, human: AsyncRestClient
) -> None:
    dev = await seat(emu.rest_url, human, "Dev")
    crashing = await mention(human, dev.room, dev.agent, "kills the agent")
    api = dev.rest.agent_api_messages
    for _ in range(MAX_DELIVERY_ATTEMPTS):  # each start claims it and dies mid-turn
        await api.mark_agent_message_processing(chat_id=dev.room, id=crashing)
    served = await api.get_agent_next_message(chat_id=dev.room)  # the open attempt replays
    assert served is not None
    assert served.data.id == crashing
    with pytest.raises(UnprocessableEntityError) as refused:
        await api.mark_agent_message_processing(chat_id=dev.room, id=crashing)
    assert "/processing_attempt" in refused.value.body["error"]["details"]
    assert await api.get_agent_next_message(chat_id=dev.room) is None
    state = emu.platform.state if emu.platform else None
    assert state is not None
    delivery = state.messages[crashing].deliveries[dev.agent.id]
    assert (delivery.status.value, delivery.given_up, len(delivery.attempts)) == (
        "failed",
        True,
        MAX_DELIVERY_ATTEMPTS,
    )
    assert delivery.attempts[-1].error == "delivery attempt cap reached"


async def test_a_given_up_message_stays_given_up_after_a_restart(
    start_emulator: StartEmulator, tmp_path: Path
) -> None:
    state_file = tmp_path / "state.json"
    first: Emulator = await start_emulator(state_file=state_file, max_delivery_attempts=1)
    human = human_client(first.rest_url)
    dev = await seat(first.rest_url, human, "Dev")
    failing = await mention(human, dev.room, dev.agent, "fails once")
    await dev.rest.agent_api_messages.mark_agent_message_processing(chat_id=dev.room, id=failing)
    await dev.rest.agent_api_messages.mark_agent_message_failed(
        chat_id=dev.room, id=failing, error="boom"
    )
    await first.shutdown(2.0)
    second: Emulator = await start_emulator(state_file=state_file)
    rest = AsyncRestClient(api_key=dev.agent.key, base_url=second.rest_url)
    assert await rest.agent_api_messages.get_agent_next_message(chat_id=dev.room) is None


def test_the_readme_states_the_caps_the_code_enforces() -> None:
    text = " ".join((REPO_ROOT / "README.md").read_text(encoding="utf-8").split())
    assert f"at most {MAX_DELIVERY_ATTEMPTS} processing attempts" in text
    assert f"{rest_files.MAX_FILE_BYTES // 1_000_000} MB a file" in text
    assert f"{rest_files.MAX_TOTAL_BYTES // 1_000_000} MB in all" in text
