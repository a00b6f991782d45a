"""band.yaml scalars mean what upstream's models make of them: strict about keys, lax
about scalars (pydantic's lax mode). Each case runs through upstream's own
`load_workspace_config` and through ours, on the validating path and on the fast path
that skips pydantic (the same bytes trusted from the stamp): accepted by both or
refused by both, and when accepted, the same values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from band.docker.launcher import LaunchError, load_workspace_config

from launcher.config import read_document, validated_spec
from launcher.errors import LauncherError
from tests.launcher.fakes import Box, band_config

ENV_FILE = {"source": "workspace-env-file", "path": ".band/secrets.env"}

# (name, YAML text for one field, where it goes, accepted)
CASES: list[tuple[str, str, str, bool]] = [
    # bool fields: the words, any case, 0/1, 0.0/1.0; nothing else
    ("ack-quoted-true", '"true"', "ack", True),
    ("ack-quoted-TRUE", '"TRUE"', "ack", True),
    ("ack-yes", "'yes'", "ack", True),
    ("ack-on", '"on"', "ack", True),
    ("ack-y", '"Y"', "ack", True),
    ("ack-t", '"t"', "ack", True),
    ("ack-str-1", '"1"', "ack", True),
    ("ack-int-1", "1", "ack", True),
    ("ack-float-1", "1.0", "ack", True),
    ("ack-bool", "true", "ack", True),
    ("ack-binary-on", "!!binary b24=", "ack", True),
    ("ack-quoted-false", '"false"', "ack", True),
    ("ack-no", '"no"', "ack", True),
    ("ack-off", '"off"', "ack", True),
    ("ack-int-0", "0", "ack", True),
    ("ack-int-2", "2", "ack", False),
    ("ack-half", "0.5", "ack", False),
    ("ack-maybe", '"maybe"', "ack", False),
    ("ack-padded", '" true"', "ack", False),
    ("ack-empty", '""', "ack", False),
    ("ack-null", "null", "ack", False),
    ("ack-list", "[true]", "ack", False),
    ("index-yes", '"yes"', "index", True),
    ("index-off", '"off"', "index", True),
    ("index-int-1", "1", "index", True),
    ("index-nope", '"nope"', "index", False),
    # string fields: text (or UTF-8 bytes), never a number, a bool or a date
    ("id-text", '"agent-7"', "id", True),
    ("id-binary", "!!binary YWdlbnQtNw==", "id", True),
    ("id-int", "123", "id", False),
    ("id-float", "1.5", "id", False),
    ("id-bool", "true", "id", False),
    ("id-date", "2026-11-30", "id", False),
    ("entrypoint-int", "7", "entrypoint", False),
    ("branch-null", "null", "branch", True),
    ("branch-int", "42", "branch", False),
    ("state-binary", "!!binary L2gvc3RhdGU=", "state", True),
    # the version is the string "1" only
    ("version-int", "1", "version", False),
    ("version-float", "1.0", "version", False),
    ("version-str", '"1"', "version", True),
]


def document(where: str, value: str) -> str:
    """A valid band.yaml as text, with `value` (YAML) as the field `where` names."""
    import yaml

    config = band_config(Path("/h"))
    config["credentials"] = dict(ENV_FILE, acknowledgePlaintextInSandbox=True)
    config["repo"] = {"url": "https://github.com/o/r", "branch": "main"}
    config["project"] = {"path": "app"}
    marker = "__FIELD__"
    if where == "ack":
        config["credentials"]["acknowledgePlaintextInSandbox"] = marker
    elif where == "index":
        config["repo"]["index"] = marker
    elif where == "id":
        config["agent"]["id"] = marker
    elif where == "entrypoint":
        config["agent"]["entrypoint"] = marker
    elif where == "branch":
        config["repo"]["branch"] = marker
    elif where == "state":
        config["runtime"]["statePath"] = marker
    elif where == "version":
        config["schemaVersion"] = marker
    text = yaml.safe_dump(config, sort_keys=True)
    return text.replace(marker, value)


def upstream_values(path: Path) -> dict[str, Any] | None:
    try:
        model = load_workspace_config(path)
    except LaunchError:
        return None
    assert model.repo is not None
    assert model.credentials is not None
    return {
        "id": model.agent.id,
        "entrypoint": model.agent.entrypoint,
        "branch": model.repo.branch,
        "index": model.repo.index,
        "ack": model.credentials.acknowledge_plaintext_in_sandbox,
        "state": model.runtime.state_path,
    }


def our_values(path: Path, *, fast: bool) -> dict[str, Any] | None:
    document = read_document(path)
    try:
        spec = validated_spec(document, trusted_digest=document.digest if fast else None)
    except LauncherError:
        return None
    assert spec.repo is not None
    assert spec.credentials is not None
    return {
        "id": spec.agent_id,
        "entrypoint": spec.entrypoint,
        "branch": spec.repo.branch,
        "index": spec.repo.index,
        "ack": spec.credentials.acknowledge_plaintext,
        "state": spec.runtime.state_path,
    }


@pytest.mark.parametrize(("name", "value", "where", "accepted"), CASES, ids=[c[0] for c in CASES])
def test_scalars_coerce_exactly_like_upstream(
    box: Box, name: str, value: str, where: str, accepted: bool
) -> None:
    path = box.write(document(where, value))
    theirs = upstream_values(path)
    ours = our_values(path, fast=False)
    assert (ours is not None, theirs is not None) == (accepted, accepted), name
    assert ours == theirs
    if accepted:
        # The fast path reads the raw document without pydantic: same values.
        assert our_values(path, fast=True) == theirs
        assert all(type(v) in (str, bool, type(None)) for v in theirs.values())


def test_a_quoted_false_really_is_false_on_both_paths(box: Box) -> None:
    path = box.write(document("ack", '"false"'))
    assert our_values(path, fast=False) is not None
    for fast in (False, True):
        values = our_values(path, fast=fast)
        assert values is not None
        assert values["ack"] is False  # not the truthy string "false"
