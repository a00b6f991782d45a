from __future__ import annotations

import pytest

from launcher import identity
from launcher.environment import LauncherEnv
from launcher.errors import LauncherError


def test_agent_uid_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(identity, "current_uid", lambda: 1000)
    assert identity.require_agent_uid(LauncherEnv()) == 1000


def test_other_uid_fails_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(identity, "current_uid", lambda: 0)
    with pytest.raises(LauncherError, match=r"^\[identity\] .*uid 1000.*got uid 0.*setpriv"):
        identity.require_agent_uid(LauncherEnv())
