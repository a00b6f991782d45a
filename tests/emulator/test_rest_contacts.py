"""Contacts and the delegation exchange through the SDK's contact tools and band_rest."""

from __future__ import annotations

import pytest
from band.client.rest import AsyncRestClient
from band_rest.errors import ForbiddenError, NotFoundError

from bandkit.emulator.server import Emulator
from tests.emulator.support import (
    USER_KEY,
    assert_error,
    assert_refuses_wrong_keys,
    mention,
    raw_client,
    seat,
)

pytestmark = pytest.mark.usefixtures("no_unhandled")

AG = "/api/v1/agent"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", f"{AG}/contacts"),
        ("GET", f"{AG}/contacts/requests"),
        ("POST", f"{AG}/contacts/add"),
        ("POST", f"{AG}/contacts/remove"),
        ("POST", f"{AG}/contacts/requests/respond"),
        ("POST", f"{AG}/delegation/token"),
    ],
)
async def test_contact_routes_refuse_wrong_keys(emu: Emulator, method: str, path: str) -> None:
    await assert_refuses_wrong_keys(emu.rest_url, method, path, USER_KEY)


async def test_request_approve_list_and_remove_through_the_sdk_tools(
    emu: Emulator, human: AsyncRestClient
) -> None:
    pm = await seat(emu.rest_url, human, "PM")
    dev = await seat(emu.rest_url, human, "Dev")
    asked = await pm.tools.execute_tool_call(
        "band_add_contact", {"handle": "@dev", "message": "let's work together"}
    )
    assert isinstance(asked, dict), asked
    assert asked["status"] == "pending"
    async with raw_client(emu.rest_url, pm.agent.key) as client:  # Fern retries 409s: raw
        again = await client.post(f"{AG}/contacts/add", json={"handle": "dev"})
        assert_error(again, 409, "conflict")

    inbox = await dev.tools.list_contact_requests()
    assert inbox.data is not None
    assert inbox.metadata is not None
    (received,) = inbox.data.received or []
    assert (received.from_handle, received.message) == ("pm", "let's work together")
    assert inbox.metadata.received.total == 1
    outbox = await pm.tools.list_contact_requests()
    assert outbox.data is not None
    assert [r.to_handle for r in outbox.data.sent or []] == ["dev"]
    with pytest.raises(ForbiddenError):  # approving is for the recipient
        await pm.tools.respond_contact_request("approve", request_id=received.id)

    approved = await dev.tools.respond_contact_request("approve", handle="pm")
    assert (approved.id, approved.status) == (received.id, "approved")
    async with raw_client(emu.rest_url, dev.agent.key) as client:
        late = {"action": "reject", "request_id": received.id}
        assert_error(
            await client.post(f"{AG}/contacts/requests/respond", json=late), 409, "conflict"
        )
    for me, other in ((pm, dev), (dev, pm)):
        listed = await me.tools.list_contacts()
        assert [(c.id, c.handle, c.type) for c in listed.data or []] == [
            (other.agent.id, other.agent.name.lower(), "Agent")
        ]
    removed = await dev.tools.remove_contact(handle="pm")
    assert removed.status == "removed"
    assert (await pm.tools.list_contacts()).data == []
    with pytest.raises(NotFoundError):
        await pm.tools.remove_contact(contact_id=dev.agent.id)


async def test_inverse_requests_cancel_and_refusals(emu: Emulator, human: AsyncRestClient) -> None:
    pm = await seat(emu.rest_url, human, "PM")
    dev = await seat(emu.rest_url, human, "Dev")
    qa = await seat(emu.rest_url, human, "QA")
    await pm.tools.add_contact("dev")
    crossed = await dev.tools.add_contact("pm")  # an inverse request is approved at once
    assert crossed.status == "approved"
    assert [c.handle for c in (await pm.tools.list_contacts()).data or []] == ["dev"]

    await pm.tools.add_contact("qa")
    cancelled = await pm.tools.respond_contact_request("cancel", handle="qa")
    assert cancelled.status == "cancelled"
    assert ((await qa.tools.list_contact_requests()).data or None) is not None
    history = await pm.tools.list_contact_requests(sent_status="all")
    assert history.data is not None
    assert sorted(r.status for r in history.data.sent or []) == ["approved", "cancelled"]
    to_user = await qa.tools.add_contact("local-user")  # the user can be asked too
    assert to_user.status == "pending"

    async with raw_client(emu.rest_url, pm.agent.key) as client:
        add = f"{AG}/contacts/add"
        assert_error(await client.post(add, json={"handle": "pm"}), 400, "bad_request")
        assert_error(await client.post(add, json={"handle": "nobody"}), 404, "not_found")
        assert_error(await client.post(add, json={}), 422, "validation_error")
        respond = f"{AG}/contacts/requests/respond"
        assert_error(await client.post(respond, json={"action": "approve"}), 400, "bad_request")
        bad_action = await client.post(respond, json={"action": "ignore", "handle": "qa"})
        assert_error(bad_action, 422, "validation_error")
        remove = f"{AG}/contacts/remove"
        assert_error(await client.post(remove, json={}), 400, "bad_request")


async def test_delegation_is_refused_fail_closed(emu: Emulator, human: AsyncRestClient) -> None:
    pm = await seat(emu.rest_url, human, "PM")
    dev = await seat(emu.rest_url, human, "Dev", room=pm.room)
    asked = await mention(human, pm.room, pm.agent, "read my calendar")
    exchange = pm.rest.agent_api_delegation.exchange_delegated_token
    with pytest.raises(ForbiddenError) as refused:
        await exchange(audience="00000000-0000-4000-8000-000000000000", message_id=asked)
    assert refused.value.body.error.code == "no_delegation"
    with pytest.raises(NotFoundError):  # not delivered to this agent
        await dev.rest.agent_api_delegation.exchange_delegated_token(audience="x", message_id=asked)
    async with raw_client(emu.rest_url, pm.agent.key) as client:
        blank = await client.post(f"{AG}/delegation/token", json={"message_id": asked})
        assert "/audience" in assert_error(blank, 422, "validation_error")["details"]
