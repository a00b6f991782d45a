"""The sbx simulator against docs/sbx-cli.md: one test per
documented behaviour, so the stand-in cannot drift silently. Section numbers refer to it."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.docker_archive import write_archive
from tests.fakes.simharness import REQUIRE_TEMPLATES, Sim, simulator

CANARY = "canary-sk-sim-5a9c0e2f7b"


@pytest.fixture
def sim() -> Iterator[Sim]:
    with simulator() as s:
        s("policy", "init", "balanced", check=True)
        yield s


@pytest.fixture
def sim47() -> Iterator[Sim]:
    with simulator("0.47.0") as s:
        s("policy", "init", "balanced", check=True)
        yield s


def names(sim: Sim) -> list[str]:
    return [sb["name"] for sb in json.loads(sim("ls", "--json").stdout).get("sandboxes") or []]


def custom(sim: Sim, *scope: str) -> list[list[str]]:
    """Rows of the CUSTOM SECRETS table of `secret ls` (0.35 text output)."""
    text = sim("secret", "ls", *scope, check=True).stdout
    table = text.split("CUSTOM SECRETS\n", 1)[1].splitlines()[1:]
    return [row.split() for row in table if row.strip()]


# 1.1 / 1.6: version pinned and selectable -------------------------------------------------


def test_version_default_is_035_and_selectable() -> None:
    with simulator() as s:
        assert s("version").stdout.splitlines()[0] == "sbx version v0.35.0"
    with simulator("0.47.0") as s:
        assert s("version").stdout.splitlines()[0] == "sbx version v0.47.0"


# 1.2 create --------------------------------------------------------------------------------


def test_policy_init_required_before_first_sandbox() -> None:
    with simulator() as s:
        result = s("create", "--name", "a", "shell", str(s.workspace()))
        assert result.returncode == 1
        assert "policy init" in result.stderr
        assert s("policy", "ls").returncode == 1  # band treats this as "not initialized"


def test_create_names_are_unique(sim: Sim) -> None:
    ws = str(sim.workspace())
    assert sim("create", "--name", "a", "shell", ws).returncode == 0
    again = sim("create", "--name", "a", "shell", ws)
    assert again.returncode == 1
    assert "already exists" in again.stderr
    assert names(sim) == ["a"]


def test_create_default_name_and_allowed_characters(sim: Sim) -> None:
    ws = sim.workspace("proj")
    sim("create", "shell", str(ws), check=True)
    assert names(sim) == ["shell-proj"]
    bad = sim("create", "--name", "bad name!", "shell", str(ws))
    assert bad.returncode == 1
    assert "invalid sandbox name" in bad.stderr


def test_sandbox_kit_with_shell_agent_is_rejected(sim: Sim) -> None:
    kit = sim.workspace("kit")
    (kit / "spec.yaml").write_text(
        'schemaVersion: "2"\nkind: sandbox\nname: k\nsandbox: {image: img}\n'
    )
    result = sim("create", "--name", "a", "--kit", str(kit), "shell", str(sim.workspace()))
    assert result.returncode == 1
    assert "shell" in result.stderr


# 1.2 ls --------------------------------------------------------------------------------


def test_ls_text_columns_and_json_shape(sim: Sim) -> None:
    ws = str(sim.workspace())
    assert json.loads(sim("ls", "--json").stdout) == {}  # 0.34/0.35: key left out when empty
    sim("create", "--name", "a", "shell", ws, check=True)
    header = sim("ls").stdout.splitlines()[0].split()
    assert header == ["SANDBOX", "AGENT", "STATUS", "PORTS", "WORKSPACE"]
    row = json.loads(sim("ls", "--json").stdout)["sandboxes"][0]
    assert {"name", "id", "agent", "status"} <= set(row)
    assert row["status"] in ("running", "stopped")
    assert sim("ls", "-q").stdout.split() == ["a"]
    assert sim("list", "-q").stdout.split() == ["a"]  # undocumented alias


def test_ls_json_current_fields(sim47: Sim) -> None:
    assert json.loads(sim47("ls", "--json").stdout) == {"sandboxes": []}
    sim47("create", "--name", "a", "shell", str(sim47.workspace()), check=True)
    row = json.loads(sim47("ls", "--json").stdout)["sandboxes"][0]
    assert {"created_at", "last_used_at", "workspaces", "workspace_missing"} <= set(row)


# 1.2 stop / exec / rm -----------------------------------------------------------------


def test_stop_then_exec_starts_it_and_passes_exit_code_and_cwd(sim: Sim) -> None:
    ws = sim.workspace()
    sim("create", "--name", "a", "shell", str(ws), check=True)
    sim("stop", "a", check=True)
    assert json.loads(sim("ls", "--json").stdout)["sandboxes"][0]["status"] == "stopped"
    result = sim("exec", "a", "sh", "-c", "pwd; exit 7")
    assert result.returncode == 7
    assert result.stdout.strip() == str(ws)  # default cwd is the workspace's host path
    assert json.loads(sim("ls", "--json").stdout)["sandboxes"][0]["status"] == "running"
    env = sim("exec", "-e", "K=V", "a", "env", check=True).stdout
    assert "K=V" in env.splitlines()


def test_rm_without_force_refuses_non_interactively(sim: Sim) -> None:
    sim("create", "--name", "a", "shell", str(sim.workspace()), check=True)
    result = sim("rm", "a", input="")
    assert "[y/N]" in result.stderr
    assert names(sim) == ["a"]
    sim("rm", "-f", "a", check=True)
    assert names(sim) == []


def test_rm_keeps_sandbox_scoped_secrets_before_040(sim: Sim) -> None:
    sim("create", "--name", "a", "shell", str(sim.workspace()), check=True)
    sim("secret", "set-custom", "a", "--host", "h.example", "--env", "K_KEY", "--value", "v")
    sim("rm", "-f", "a", check=True)
    assert custom(sim, "a")[0][:3] == ["a", "h.example", "K_KEY"]


def test_rm_deletes_own_secrets_from_040(sim47: Sim) -> None:
    sim47("create", "--name", "a", "shell", str(sim47.workspace()), check=True)
    sim47("secret", "set-custom", "--sandbox", "a", "--host", "h", "--env", "K", input="v")
    sim47("rm", "-f", "a", check=True)
    listed = json.loads(sim47("secret", "ls", "--sandbox", "a", "--json").stdout)
    assert listed["custom_secrets"] == []


# 1.2 secret set-custom ------------------------------------------------------------------


def test_set_custom_value_only_via_flag_on_035(sim: Sim) -> None:
    result = sim("secret", "set-custom", "-g", "--host", "h", "--env", "K", input=CANARY)
    assert result.returncode == 1
    assert "--value" in result.stderr
    assert custom(sim) == []


def test_set_custom_value_on_stdin_on_current(sim47: Sim) -> None:
    args = ("secret", "set-custom", "--sandbox", "a", "--host", "h", "--env", "K")
    result = sim47(*args, "--placeholder", "proxy-managed", input=CANARY + "\n")
    assert result.returncode == 0, result.stderr
    listed = json.loads(sim47("secret", "ls", "--sandbox", "a", "--json").stdout)
    assert listed["custom_secrets"] == [
        {"scope": "a", "targets": ["h"], "env": "K", "placeholder": "proxy-managed"}
    ]


def test_secret_scope_grammar_differs_by_version(sim: Sim, sim47: Sim) -> None:
    on35 = sim("secret", "set-custom", "--sandbox", "a", "--host", "h", "--env", "K", "-t", "v")
    assert on35.returncode == 1
    assert "--sandbox" in on35.stderr
    on47 = sim47("secret", "set-custom", "-g", "--host", "h", "--env", "K", "-t", "v")
    assert on47.returncode == 0
    assert "deprecated" in on47.stderr
    assert sim("secret", "ls", "--json").returncode == 1  # no --json on 0.35


def test_set_custom_upserts_by_placeholder_and_refuses_another(sim: Sim) -> None:
    base = ("secret", "set-custom", "a", "--host", "h", "--env", "K")
    sim(*base, "--placeholder", "p1", "--value", "one", check=True)
    sim(*base, "--placeholder", "p1", "--value", "two", check=True)
    assert len(custom(sim, "a")) == 1
    other = sim(*base, "--placeholder", "p2", "--value", "three")
    assert other.returncode == 1
    assert "another placeholder" in other.stderr
    keychain = json.loads((sim.state / "keychain.json").read_text())
    assert list(keychain.values()) == ["two"]


def test_set_custom_placeholder_generation(sim: Sim) -> None:
    out = sim(
        "secret",
        "set-custom",
        "-g",
        "--host",
        "h",
        "--env",
        "K",
        "--placeholder",
        "sk-{rand}",
        "--value",
        "v",
        check=True,
    ).stdout
    assert "Generated placeholder: sk-" in out
    auto = sim("secret", "set-custom", "-g", "--host", "h2", "--env", "K2", "--value", "v")
    assert 'placeholder "sbx-cs-' in auto.stdout


def test_scoped_secret_before_create_persists_and_applies_at_create(sim: Sim) -> None:
    sim(
        "secret",
        "set-custom",
        "a",
        "--host",
        "h",
        "--env",
        "BAND_API_KEY",
        "--placeholder",
        "proxy-managed",
        "--value",
        CANARY,
        check=True,
    )
    sim("create", "--name", "a", "shell", str(sim.workspace()), check=True)
    env = sim("exec", "a", "env", check=True).stdout.splitlines()
    assert "BAND_API_KEY=proxy-managed" in env
    assert CANARY not in "\n".join(env)  # the VM sees only the placeholder


def test_reserved_env_names_do_not_create_the_env_var(sim: Sim) -> None:
    sim(
        "secret",
        "set-custom",
        "a",
        "--host",
        "api.openai.com",
        "--env",
        "OPENAI_API_KEY",
        "--placeholder",
        "ph-openai",
        "--value",
        "v",
        check=True,
    )
    sim("create", "--name", "a", "shell", str(sim.workspace()), check=True)
    env = sim("exec", "a", "env", check=True).stdout
    assert "OPENAI_API_KEY" not in env
    assert custom(sim, "a")[0][2] == "OPENAI_API_KEY"  # stored all the same


def test_global_secret_applies_only_to_sandboxes_created_afterwards(sim: Sim) -> None:
    sim("create", "--name", "old", "shell", str(sim.workspace("o")), check=True)
    sim(
        "secret",
        "set-custom",
        "-g",
        "--host",
        "h",
        "--env",
        "G_KEY",
        "--placeholder",
        "gph",
        "--value",
        "v",
        check=True,
    )
    sim("create", "--name", "new", "shell", str(sim.workspace("n")), check=True)
    assert "G_KEY=gph" not in sim("exec", "old", "env").stdout.splitlines()
    assert "G_KEY=gph" in sim("exec", "new", "env").stdout.splitlines()


# 1.2 secret set / ls / rm --------------------------------------------------------------


def test_secret_set_existing_without_force_is_silent_noop(sim: Sim) -> None:
    sim("secret", "set", "-g", "github", input="first\n", check=True)
    again = sim("secret", "set", "-g", "github", input="")
    assert again.returncode == 0
    assert list(json.loads((sim.state / "keychain.json").read_text()).values()) == ["first"]
    sim("secret", "set", "-g", "github", "-f", "-t", "second", check=True)
    assert list(json.loads((sim.state / "keychain.json").read_text()).values()) == ["second"]


def test_secret_ls_two_tables_masked(sim: Sim) -> None:
    sim("secret", "set", "-g", "github", "-t", CANARY, check=True)
    sim(
        "secret",
        "set-custom",
        "a",
        "--host",
        "h1",
        "--host",
        "h2",
        "--env",
        "K",
        "--placeholder",
        "p",
        "--value",
        CANARY,
        check=True,
    )
    text = sim("secret", "ls").stdout
    lines = text.splitlines()
    assert lines[0].split() == ["SCOPE", "TYPE", "NAME", "SECRET"]
    assert lines[1].split() == ["(global)", "service", "github", "****"]
    assert "CUSTOM SECRETS" in lines
    assert custom(sim) == [["a", "h1,h2", "K", "p", "****"]]
    assert sim("secret", "ls", "-g").stdout.count("h1,h2") == 0  # -g lists only global
    assert CANARY not in text


def test_secret_rm_by_host_is_idempotent_and_by_placeholder(sim: Sim) -> None:
    rm = sim("secret", "rm", "a", "--host", "h", "-f")
    assert (rm.returncode, rm.stdout.strip()) == (0, "Deleted 0")
    sim(
        "secret",
        "set-custom",
        "a",
        "--host",
        "h",
        "--env",
        "K",
        "--placeholder",
        "p",
        "--value",
        "v",
        check=True,
    )
    assert sim("secret", "rm", "a", "--host", "h", "-f").stdout.strip() == "Deleted 1"
    sim(
        "secret",
        "set-custom",
        "-g",
        "--host",
        "x",
        "--host",
        "y",
        "--env",
        "K",
        "--placeholder",
        "multi",
        "--value",
        "v",
        check=True,
    )
    assert sim("secret", "rm", "-g", "--host", "x", "-f").stdout.strip() == "Deleted 0"
    assert sim("secret", "rm", "-g", "--placeholder", "multi").stdout.strip() == "Deleted 1"


# 1.2 policy ----------------------------------------------------------------------------


def test_policy_allow_is_global_by_default_and_check_exit_codes(sim: Sim) -> None:
    assert sim("policy", "check", "network", "emu.example").returncode == 1  # denied
    sim("policy", "allow", "network", "emu.example,other.example:8443", check=True)
    assert sim("policy", "check", "network", "emu.example").returncode == 0
    assert sim("policy", "check", "network", "other.example").returncode == 1  # port 443
    assert sim("policy", "check", "network", "other.example:8443").returncode == 0
    rules = json.loads(sim("policy", "ls", "--json").stdout)["rules"]
    assert rules[0]["applies_to"] == "(global)"
    assert set(rules[0]) == {
        "id",
        "name",
        "policy_id",
        "scope",
        "applies_to",
        "resource_type",
        "decision",
        "resources",
        "origin",
        "status",
    }
    sim("policy", "rm", "network", "--resource", "emu.example,other.example:8443", check=True)
    assert sim("policy", "check", "network", "emu.example").returncode == 1


def test_policy_deny_wins_and_wildcards(sim: Sim) -> None:
    sim("policy", "allow", "network", "*.band.example", check=True)
    sim("policy", "deny", "network", "bad.band.example", check=True)
    assert sim("policy", "check", "network", "app.band.example").returncode == 0
    assert sim("policy", "check", "network", "bad.band.example").returncode == 1
    assert sim("policy", "check", "network", "a.b.band.example").returncode == 1  # one label


def test_policy_sandbox_rule_refused_before_the_sandbox_exists(sim: Sim) -> None:
    early = sim("policy", "allow", "network", "--sandbox", "later", "h.example")
    assert early.returncode == 1
    assert "not found" in early.stderr
    sim("create", "--name", "later", "shell", str(sim.workspace()), check=True)
    sim("policy", "allow", "network", "--sandbox", "later", "h.example", check=True)
    assert sim("policy", "check", "network", "--sandbox", "later", "h.example").returncode == 0
    assert sim("policy", "check", "network", "h.example").returncode == 1
    assert sim("policy", "ls", "ghost").returncode == 0  # unknown sandbox: not an error


def test_policy_g_flag_is_gone_since_032(sim: Sim) -> None:
    result = sim("policy", "allow", "network", "-g", "h.example")
    assert result.returncode == 1
    assert "-g" in result.stderr


# 1.2 kit validate ----------------------------------------------------------------------


def _kit(sim: Sim, body: str) -> Path:
    kit = sim.workspace("kit")
    (kit / "spec.yaml").write_text(body)
    return kit


def test_kit_validate_pass(sim: Sim) -> None:
    kit = _kit(
        sim,
        'schemaVersion: "2"\nkind: sandbox\nname: band-python-kit\n'
        "sandbox: {image: band-python-kit:local}\n",
    )
    result = sim("kit", "validate", str(kit))
    assert (result.returncode, result.stdout.split(":")[0]) == (0, "PASS")


def test_kit_validate_invalid(sim: Sim) -> None:
    kit = _kit(sim, 'schemaVersion: "2"\nkind: sandbox\nname: k\ntemplate: x\n')
    result = sim("kit", "validate", str(kit))
    assert result.returncode == 1
    assert result.stderr.startswith("INVALID: ")


def test_kit_validate_error_for_missing_path_and_oci(sim: Sim) -> None:
    missing = sim("kit", "validate", str(sim.scratch / "nope"))
    assert (missing.returncode, missing.stderr[:6]) == (1, "ERROR:")
    oci = sim("kit", "validate", "docker.io/bandhq/band-python-kit:1.0.0")
    assert oci.returncode == 1
    assert oci.stderr.startswith("ERROR: OCI references are not supported")


# 1.1 / 1.4 kit spec shapes by version ----------------------------------------------------

KIT_DIR = Path(__file__).resolve().parents[2] / "docker" / "band_python_kit"
CURRENT_FILE, LEGACY_FILE = "spec.yaml", "sbx-below-0.42.1/spec.yaml"


def _repo_kit(sim: Sim, shape_file: str) -> Path:
    return _kit(sim, (KIT_DIR / shape_file).read_text(encoding="utf-8"))


def test_kit_validate_035_takes_the_legacy_shape_and_refuses_the_current(sim: Sim) -> None:
    legacy = sim("kit", "validate", str(KIT_DIR / "sbx-below-0.42.1"))
    assert (legacy.returncode, legacy.stdout.split(":")[0]) == (0, "PASS"), legacy.stderr
    current = sim("kit", "validate", str(KIT_DIR))
    assert current.returncode == 1
    assert current.stderr.strip() == "INVALID: field permissions not found in type spec"


def test_kit_validate_047_takes_the_current_shape_and_refuses_the_legacy(sim47: Sim) -> None:
    current = sim47("kit", "validate", str(KIT_DIR))  # the repo's kit directory, as it is
    assert (current.returncode, current.stdout.split(":")[0]) == (0, "PASS"), current.stderr
    legacy = sim47("kit", "validate", str(KIT_DIR / "sbx-below-0.42.1"))
    assert legacy.returncode == 1
    assert legacy.stderr.strip() == "INVALID: field caps not found in type spec.specFileV2"


def _agent_workspace(sim: Sim) -> str:
    """A workspace a kit's agent starts in (it exits at once: no agent id)."""
    ws = sim.workspace()
    (ws / "band.yaml").write_text('schemaVersion: "1"\n')
    return str(ws)


def test_create_decodes_strictly_on_035_too(sim: Sim) -> None:
    ws = _agent_workspace(sim)
    refused = sim("create", "--name", "k1", "--kit", str(KIT_DIR), "band-python-kit", ws)
    assert refused.returncode == 1
    assert "field permissions not found in type spec" in refused.stderr
    legacy = str(KIT_DIR / "sbx-below-0.42.1")
    sim("create", "--name", "k2", "--kit", legacy, "band-python-kit", ws, check=True)


def test_published_kit_tags_carry_the_shape_their_name_says(sim: Sim, sim47: Sim) -> None:
    ref = "docker.io/bandhq/band-python-kit:1.2.0"
    for s, good, bad in (
        (sim, f"{ref}-sbx-below-0.42.1", ref),
        (sim47, ref, f"{ref}-sbx-below-0.42.1"),
    ):
        ws = _agent_workspace(s)
        assert s("create", "--name", "bad", "--kit", bad, "band-python-kit", ws).returncode == 1
        s("create", "--name", "good", "--kit", good, "band-python-kit", ws, check=True)


def test_kit_validate_047_refuses_each_legacy_key() -> None:
    base = 'schemaVersion: "2"\nkind: sandbox\nname: k\n'
    with simulator("0.47.0") as s:
        for extra, field in [
            ("sandbox: {image: i, aiFilename: AGENTS.md}\n", "aiFilename"),
            ("sandbox: {image: i}\ncommands: {startup: [{command: [x]}]}\n", "commands"),
            ("sandbox: {image: i}\nagentContext: hi\n", "agentContext"),
        ]:
            result = s("kit", "validate", str(_kit(s, base + extra)))
            assert result.returncode == 1
            assert (
                result.stderr.strip() == f"INVALID: field {field} not found in type spec.specFileV2"
            )


def test_kit_validate_between_038_and_042_takes_both_shapes() -> None:
    with simulator("0.41.0") as s:
        for shape_file in (CURRENT_FILE, LEGACY_FILE):
            result = s("kit", "validate", str(_repo_kit(s, shape_file)))
            assert result.returncode == 0, (shape_file, result.stderr)


def test_kit_validate_current_entrypoint_must_be_an_argv(sim47: Sim) -> None:
    kit = _kit(
        sim47,
        'schemaVersion: "2"\nkind: sandbox\nname: k\nsandbox: {image: i, entrypoint: run.sh}\n',
    )
    result = sim47("kit", "validate", str(kit))
    assert result.returncode == 1
    assert (
        result.stderr.strip() == "INVALID: sandbox.entrypoint must be a non-empty list of strings"
    )


# 1.2 template load / ls / rm ------------------------------------------------------------


def _templates(sim: Sim) -> list[dict[str, object]]:
    images: list[dict[str, object]] = json.loads(sim("template", "ls", "--json").stdout)["images"]
    return images


def test_template_load_takes_only_an_image_archive(sim: Sim) -> None:
    junk = sim.scratch / "junk.tar"
    junk.write_bytes(b"not a tar at all" * 64)
    refused = sim("template", "load", str(junk))
    assert refused.returncode == 1
    assert refused.stderr.startswith("ERROR: loading template: not an image archive")
    plain = sim.scratch / "plain.tar"
    with tarfile.open(plain, "w") as tar:  # a tar, but not what `docker save` writes
        tar.add(str(junk), arcname="junk")
    assert "no manifest.json" in sim("template", "load", str(plain)).stderr
    assert _templates(sim) == []


def test_template_load_lists_the_tag_with_its_config_digest(sim: Sim) -> None:
    archive = sim.scratch / "kit.tar"
    image_id = write_archive("band-python-kit:local", archive)
    with archive.open("rb") as fh:  # `docker save IMG | sbx template load /dev/stdin`
        loaded = subprocess.run(
            ["sbx", "template", "load", "/dev/stdin"], stdin=fh, env=sim.env,
            capture_output=True, text=True, check=False, timeout=30,
        )  # fmt: skip
    assert loaded.returncode == 0, loaded.stderr
    (entry,) = _templates(sim)
    assert (entry["repository"], entry["tag"]) == ("docker.io/library/band-python-kit", "local")
    assert entry["id"] == image_id.removeprefix("sha256:")[:12]  # the short form
    rebuilt = sim.scratch / "kit2.tar"
    new_id = write_archive("band-python-kit:local", rebuilt, payload=b"rebuilt")
    sim("template", "load", str(rebuilt), check=True)
    (entry,) = _templates(sim)  # the tag moved to the image loaded last
    assert entry["id"] == new_id.removeprefix("sha256:")[:12]
    assert "SANDBOX" not in sim("template", "ls").stdout
    assert "docker.io/library/band-python-kit" in sim("template", "ls").stdout


def test_template_rm_by_tag_refuses_while_a_sandbox_uses_it(sim47: Sim) -> None:
    archive = sim47.scratch / "kit.tar"
    write_archive("band-python-kit:local", archive)
    sim47("template", "load", str(archive), check=True)
    kit = _kit(sim47, (KIT_DIR / CURRENT_FILE).read_text())
    sim47("create", "--name", "uses", "--kit", str(kit), "band-python-kit", str(kit), check=True)
    busy = sim47("template", "rm", "band-python-kit:local")
    assert (busy.returncode, busy.stderr.strip()) == (
        1,
        "ERROR: template band-python-kit:local is in use by sandbox uses",
    )
    sim47("rm", "-f", "uses", check=True)
    sim47("template", "rm", "band-python-kit:local", check=True)
    assert _templates(sim47) == []
    gone = sim47("template", "rm", "band-python-kit:local")
    assert (gone.returncode, gone.stderr.strip()) == (
        1,
        "ERROR: template band-python-kit:local not found",
    )


def test_create_can_require_a_loaded_image(sim47: Sim) -> None:
    sim47.env[REQUIRE_TEMPLATES] = "1"
    kit = _kit(sim47, (KIT_DIR / CURRENT_FILE).read_text())
    argv = ("create", "--name", "k", "--kit", str(kit), "band-python-kit", str(kit))
    refused = sim47(*argv)
    assert refused.returncode == 1
    assert 'pull failed for image "band-python-kit:local"' in refused.stderr
    archive = sim47.scratch / "kit.tar"
    write_archive("band-python-kit:local", archive)
    sim47("template", "load", str(archive), check=True)
    sim47(*argv, check=True)


# 1.2 daemon ----------------------------------------------------------------------------


def test_daemon_stop_stops_sandboxes_and_start_leaves_them_stopped(sim: Sim) -> None:
    sim("create", "--name", "a", "shell", str(sim.workspace()), check=True)
    sim("daemon", "stop", check=True)
    sim("daemon", "start", "-d", check=True)
    assert json.loads(sim("ls", "--json").stdout)["sandboxes"][0]["status"] == "stopped"


# Custody of the simulator itself ---------------------------------------------------------


def test_values_never_printed_or_stored_outside_the_keychain(sim: Sim) -> None:
    sim(
        "secret",
        "set-custom",
        "a",
        "--host",
        "h",
        "--env",
        "K",
        "--placeholder",
        "p",
        "--value",
        CANARY,
        check=True,
    )
    sim("secret", "set", "-g", "github", "-t", CANARY, check=True)
    printed = sim("secret", "ls").stdout + sim("secret", "ls", "a").stdout
    assert CANARY not in printed
    assert CANARY not in sim.outputs()  # state.json, calls.jsonl (argv logged as ***)
    assert '"***"' in (sim.state / "calls.jsonl").read_text()
    keychain = sim.state / "keychain.json"
    assert stat.S_IMODE(keychain.stat().st_mode) == 0o600
    assert os.stat(sim.state).st_mode & 0o066 == 0  # others may traverse, never list
