"""sbx simulator: a stand-in for the Docker Sandboxes CLI, for tests.

Run as `sbx` through `tests/fakes/sbx` (the harness puts that folder first on PATH), which
imports this module: imported, its bytecode is cached, where a script this size was
compiled again at every call (about 20 ms of a call's 100 ms).

Reference: docs/sbx-cli.md; `test_sbx_sim.py` has one test per documented
behaviour. State lives in $SBX_SIM_STATE (a directory, mode 0711): `state.json`
(sandboxes, secret metadata, policy rules; never a value), `keychain.json` (0600: the
stand-in for the host credential store, the only file holding values), `calls.jsonl`
(argv of every call, values replaced by ***), `vms/<id>/` (a running sandbox's box).

$SBX_SIM_VERSION picks the grammar: 0.34.0 / 0.35.0 (default): positional or `-g` secret
scopes, `set-custom` value only by `--value`/`-t`, `secret ls` as two text tables, `rm`
keeps sandbox-scoped secrets, `ls --json` leaves out the key when empty. 0.47.0
("current"): `--sandbox` scopes (`-g`/positional warn as deprecated), value on stdin,
`secret ls --json`, `create <kit> WS`, `rm` deletes the sandbox's own secrets (0.40+).

Modelled choices the sources leave open (INFERRED, see the reference):
- `set-custom` upserts by placeholder: the same (scope, env, host) with another
  placeholder is refused, as band's launch.sh observed;
- `rm` without `-f` reads one answer from stdin; anything but y/yes cancels, exit 0
  (the documented cancel of `secret set`);
- `create` starts the sandbox (the kit's startup runs at create), status `running`;
- `sbx version` prints `sbx version vX.Y.Z` on its first line;
- `template load FILE` (or /dev/stdin) takes a `docker save` archive only: a tar with a
  `manifest.json` whose images' config blobs are in it; each RepoTag (normalized,
  `x:t` -> docker.io/library/x) then lists with the config digest as its id (the short
  12-hex form, `template ls --json` -> {"images": [...]}), a tag moving to the image
  loaded last; `template rm TAG|ID` refuses while a sandbox made from it exists; with
  $SBX_SIM_REQUIRE_TEMPLATES=1 `create` refuses an image neither loaded nor pinned by
  digest (a pull from the registry would fail).

A sandbox created from a kit with startup commands runs, through
`bandkit.runtimes.simbacking`, the real launcher and agent as host processes, with the
credential proxy standing in for sbx's; `stop`, `daemon stop` (SIGTERM to the agent),
`run --name` and `exec` (which starts a stopped sandbox) act on those processes.

`create` decodes the kit strictly, as `kit validate` does: before 0.38 the 0.34-era
grammar only (`field permissions not found in type spec`), from 0.42.1 the new decoder
only (the 0.34-era keys fail with `field caps not found in type spec.specFileV2`). A
kit's `sandbox.entrypoint` is the attach path: from 0.43 it runs only while a session is
attached (`sbx run --name N` on a terminal), and a sandbox with no attached session
stops after $SBX_SIM_IDLE_S seconds (default 75; real sbx: about 60-90 s). Modelled
choices (INFERRED): `run --name` needs a TTY on stdin; it mirrors the entrypoint's
output from the moment it attaches; the entrypoint stops when its last session detaches
(SIGHUP/SIGTERM/SIGINT, or the terminal closing); `exec` neither attaches nor resets the
idle clock. An idle watcher process per boot (`__idle-watch`, hidden) plays the daemon's
part; sessions hold an flock on `sessions/<id>/<pid>.lock`, so a killed session counts
as detached at once (the watcher then stops the entrypoint, as the session's end would
have).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ENTRY = Path(__file__).resolve().with_name("sbx")  # what PATH finds as `sbx`

DEFAULT_VERSION = "0.35.0"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+-]*$")
KIT_NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?$")
RESERVED_CUSTOM_ENVS = frozenset({"OPENAI_API_KEY", "ANTHROPIC_API_KEY"})
SERVICES = (
    *("anthropic", "aws", "cursor", "droid", "github", "google"),
    *("groq", "mistral", "nebius", "openai", "xai", "band"),
)
PRESETS = {"allow-all": "allow", "balanced": "deny", "deny-all": "deny"}
BALANCED_DEFAULTS = ("pypi.org", "files.pythonhosted.org", "github.com", "*.github.com")
KIT_COMMON_KEYS = {
    "schemaVersion",
    "kind",
    "name",
    "version",
    "displayName",
    "description",
    "sandbox",
    "environment",
    "credentials",
}
# The 0.34-era field grammar; 0.42.1's decoder rejects it (docs/sbx-cli.md 1.1, 1.4).
KIT_LEGACY_KEYS = {"commands", "caps", "agentContext"}
KIT_LEGACY_SANDBOX_KEYS = {"aiFilename"}
# The v2 decoder's fields (0.38+).
KIT_CURRENT_KEYS = {"permissions", "agentInstructions"}
VALUE_FLAGS = {"--value", "-t", "--token", "--password"}
LEGACY_KIT_TAG_SUFFIX = "-sbx-below-0.42.1"  # our release's legacy-shape kit tags
PUBLISHED_IMAGE = "registry.example/band-python-kit-image:1.0.0@sha256:" + "0" * 64
# Set to 1: `create` refuses an image that is not loaded (`template load`) and not pinned by
# digest, as real sbx fails to pull a local build (INFERRED; default off: every image counts
# as pullable, the simulator has no registry).
REQUIRE_TEMPLATES_ENV = "SBX_SIM_REQUIRE_TEMPLATES"
AUTO_STOP_FROM = (0, 43, 0)  # unattached sandboxes stop after an idle time
IDLE_ENV = "SBX_SIM_IDLE_S"
DEFAULT_IDLE_S = 75.0
POLL_S = 0.1
WATCHER_ENV = "SBX_SIM_WATCHER"  # marks the idle watchers (the harness ends leftovers)


class Fail(Exception):
    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def version() -> str:
    return os.environ.get("SBX_SIM_VERSION", DEFAULT_VERSION)


def vtuple() -> tuple[int, ...]:
    return tuple(int(p) for p in version().split(".")[:3])


def modern() -> bool:
    """0.38+: --sandbox secret scopes, secrets global by default, stdin values, JSON ls."""
    return vtuple() >= (0, 38, 0)


def auto_stops() -> bool:
    return vtuple() >= AUTO_STOP_FROM


def idle_s() -> float:
    return float(os.environ.get(IDLE_ENV) or DEFAULT_IDLE_S)


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Store:
    def __init__(self) -> None:
        root = os.environ.get("SBX_SIM_STATE")
        if not root:
            raise Fail("ERROR: SBX_SIM_STATE is not set (simulator state directory)")
        self.root = Path(root)
        # 0711: the agent uid must reach vms/<id> (its box), but may not list the state.
        self.root.mkdir(mode=0o711, parents=True, exist_ok=True)
        os.chmod(self.root, 0o711)  # noqa: S103 - traverse only, see above
        (self.root / "vms").mkdir(mode=0o755, exist_ok=True)
        self._lock = open(self.root / "state.lock", "w")  # noqa: SIM115
        fcntl.flock(self._lock, fcntl.LOCK_EX)
        path = self.root / "state.json"
        self.data: dict[str, Any] = (
            json.loads(path.read_text())
            if path.exists()
            else {
                "daemon": "stopped",
                "policy": None,
                "sandboxes": {},
                "secrets": [],
                "custom": [],
                "rules": [],
                "templates": [],
                "next_rule": 1,
            }
        )
        kc = self.root / "keychain.json"
        self.keychain: dict[str, str] = json.loads(kc.read_text()) if kc.exists() else {}

    def release(self) -> None:
        self._lock.close()

    def save(self) -> None:
        _write(self.root / "state.json", json.dumps(self.data, indent=2, sort_keys=True))
        _write(self.root / "keychain.json", json.dumps(self.keychain), mode=0o600)

    @property
    def sandboxes(self) -> dict[str, dict[str, Any]]:
        return self.data["sandboxes"]


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def log_call(argv: list[str]) -> None:
    root = os.environ.get("SBX_SIM_STATE")
    if not root:
        return
    shown: list[str] = []
    hide = False
    for arg in argv:
        shown.append("***" if hide else arg)
        hide = arg in VALUE_FLAGS
        if "=" in arg and arg.split("=", 1)[0] in VALUE_FLAGS:
            shown[-1] = arg.split("=", 1)[0] + "=***"
    Path(root).mkdir(mode=0o711, parents=True, exist_ok=True)
    with open(Path(root) / "calls.jsonl", "a") as fh:
        fh.write(json.dumps({"argv": shown, "version": version()}) + "\n")


# ---------------------------------------------------------------- argument parsing


class Args:
    """A tiny flag parser: known flags with values, boolean flags, positionals."""

    def __init__(
        self,
        argv: list[str],
        *,
        values: set[str],
        bools: set[str],
        multi: set[str] = frozenset(),
        stop_at_first_positional: bool = False,
    ):
        self.opts: dict[str, Any] = {}
        self.pos: list[str] = []
        i = 0
        while i < len(argv):
            arg = argv[i]
            if arg == "--":
                self.pos += argv[i + 1 :]
                break
            if stop_at_first_positional and self.pos:
                self.pos += argv[i:]  # exec: everything after SANDBOX is the command
                break
            key, eq, inline = arg.partition("=")
            if arg.startswith("-") and (key in values or key in multi):
                if eq:
                    val = inline
                else:
                    i += 1
                    if i >= len(argv):
                        raise Fail(f"ERROR: flag needs an argument: {key}")
                    val = argv[i]
                if key in multi:
                    self.opts.setdefault(key, []).append(val)
                else:
                    self.opts[key] = val
            elif arg.startswith("-") and arg in bools:
                self.opts[arg] = True
            elif arg.startswith("-") and len(arg) > 1:
                raise Fail(f"ERROR: unknown flag: {arg}")
            else:
                self.pos.append(arg)
            i += 1

    def get(self, *names: str) -> Any:
        for name in names:
            if name in self.opts:
                return self.opts[name]
        return None


# ---------------------------------------------------------------- backing (local runtime)


def backing() -> Any:
    # The backing lives beside this script (tests/fakes/simbacking.py); it is the
    # simulator's only project import, and it imports the real runtime's hostbox.
    import simbacking  # beside this module, on sys.path through the `sbx` entry

    return simbacking


def start_sandbox(store: Store, name: str) -> None:
    sb = store.sandboxes[name]
    if sb["status"] == "running":
        return
    if store.data["daemon"] != "running":
        store.data["daemon"] = "running"
    sb["status"] = "running"
    sb["boot"] = sb.get("boot", 0) + 1
    # Before 0.43 the simulator runs an entrypoint at start too (headless, as before).
    if sb.get("startup") or (sb.get("entrypoint") and not auto_stops()):
        start_agent(store, name)
    if auto_stops():
        spawn_watcher(store, name)


def start_agent(store: Store, name: str) -> None:
    sb = store.sandboxes[name]
    env, injections = sandbox_env(store, name)
    backing().start(
        store.root / "vms" / sb["id"],
        name=name,
        workspace=sb["workspaces"][0],
        env=env,
        injections=injections,
    )


def stop_sandbox(store: Store, name: str) -> None:
    sb = store.sandboxes[name]
    if sb.get("startup") or sb.get("entrypoint") or (store.root / "vms" / sb["id"]).exists():
        backing().stop(store.root / "vms" / sb["id"])
    sb["status"] = "stopped"


def sandbox_env(store: Store, name: str) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """The VM env (placeholders only) and the proxy's header swaps (with real values)."""
    sb = store.sandboxes[name]
    env: dict[str, str] = {**sb.get("env", {}), "WORKSPACE_DIR": sb["workspaces"][0]}
    injections: list[dict[str, Any]] = []
    for entry in store.data["custom"]:
        if entry["scope"] not in ("(global)", name):
            continue
        if entry["scope"] == "(global)" and entry["created_seq"] > store.sandboxes[name]["seq"]:
            continue  # a global secret applies only to sandboxes created afterwards
        if entry["env"] in RESERVED_CUSTOM_ENVS:
            continue  # ISS #348: reserved names do not create the env var
        env[entry["env"]] = entry["placeholder"]
        injections.append(
            {
                "hosts": entry["targets"],
                "placeholder": entry["placeholder"],
                "value": store.keychain.get(entry["id"], ""),
            }
        )
    return env, injections


# ---------------------------------------------------------------- commands


def out(text: str = "") -> None:
    sys.stdout.write(text + "\n")


def err(text: str) -> None:
    sys.stderr.write(text + "\n")


def require_policy(store: Store) -> None:
    if store.data["policy"] is None:
        raise Fail("ERROR: no network policy configured; run `sbx policy init <preset>`")


def cmd_version(store: Store, argv: list[str]) -> int:
    out(f"sbx version v{version()}")
    out("simulator: tests/fakes/sbx")
    return 0


def cmd_create(store: Store, argv: list[str], *, run: bool = False) -> int:
    a = Args(
        argv,
        values={"--name", "-t", "--template", "--cpus", "-m", "--memory", "--profile", "--branch"},
        bools={"-q", "--quiet", "--clone"},
        multi={"--kit"},
    )
    kits: list[str] = a.get("--kit") or []
    pos = list(a.pos)
    if not pos:
        raise Fail("ERROR: requires at least 1 arg(s): AGENT PATH")
    agent = pos.pop(0)
    if modern() and not kits and (Path(agent).is_dir() or ":" in agent):
        kits, agent = [agent], _kit_name(agent)  # 0.47: `create <kit> WS`
    if not pos:
        raise Fail("ERROR: requires a workspace PATH")
    workspaces = [p.removesuffix(":ro") for p in pos]
    for ws in workspaces:
        if not os.path.isabs(ws):
            ws_abs = os.path.abspath(ws)
            workspaces[workspaces.index(ws)] = ws_abs
        if not Path(workspaces[-1]).is_dir():
            raise Fail(f"ERROR: workspace path does not exist: {workspaces[-1]}")
    name = a.get("--name") or f"{agent}-{Path(workspaces[0]).name}"
    if not NAME_RE.match(name):
        raise Fail(f"ERROR: invalid sandbox name {name!r}: use letters, digits, '-', '.', '+'")
    if name in store.sandboxes:
        raise Fail(f"ERROR: sandbox {name!r} already exists")
    require_policy(store)
    startup = entrypoint = False
    kit_env: dict[str, str] = {}
    image = a.get("-t", "--template") or ""
    for kit in kits:
        spec = _load_kit(kit)
        if spec.get("kind") == "sandbox" and agent == "shell":
            raise Fail("ERROR: a sandbox kit cannot be combined with the shell agent")
        # The decoder is strict on every version (an unknown field fails the load); from
        # 0.42.1 it is the new one, which refuses the 0.34-era keys.
        decoding = [p for p in _validate_spec(spec)[0] if p.startswith("field ")]
        if decoding:
            raise Fail(f"ERROR: loading kit {kit}: {decoding[0]}")
        image = image or str((spec.get("sandbox") or {}).get("image") or "")
        startup = startup or bool((spec.get("commands") or {}).get("startup"))
        entrypoint = entrypoint or bool((spec.get("sandbox") or {}).get("entrypoint"))
        variables = (spec.get("environment") or {}).get("variables") or {}
        kit_env |= {str(k): str(v) for k, v in variables.items()}
    template = held_template(store, image) if image else None
    if (
        image
        and template is None
        and "@sha256:" not in image
        and os.environ.get(REQUIRE_TEMPLATES_ENV)
    ):
        raise Fail(f'ERROR: request failed: 403 Forbidden: pull failed for image "{image}"')
    store.data["seq"] = store.data.get("seq", 0) + 1
    store.sandboxes[name] = {
        "id": uuid.uuid4().hex[:12],
        "name": name,
        "agent": agent,
        "status": "stopped",
        "workspaces": workspaces,
        "kits": kits,
        "template": a.get("-t", "--template") or "",
        "image": image,
        "template_id": template["id"] if template else "",
        "created_at": now(),
        "seq": store.data["seq"],
        "startup": startup,
        "entrypoint": entrypoint,
        "env": kit_env,
    }
    store.data["daemon"] = "running"
    start_sandbox(store, name)  # kit startup commands run at create
    store.save()
    if not a.get("-q", "--quiet"):
        out(f"Created sandbox {name}")
    return 0


def _kit_name(ref: str) -> str:
    spec = _load_kit(ref)
    return str(spec.get("name") or "kit")


def _load_kit(ref: str) -> dict[str, Any]:
    import yaml

    path = Path(ref)
    if not path.is_dir():
        if "/" in ref and ":" in ref and not path.exists():
            # No registry here: a published kit is our release's, in the shape its tag
            # names (INFERRED from our publishing: `X.Y.Z-sbx-below-0.42.1` is the legacy
            # shape, any other tag the current one).
            name = ref.rsplit("/", 1)[-1].split(":")[0]
            tag = ref.rsplit(":", 1)[-1].split("@")[0]
            head = {"schemaVersion": "2", "kind": "sandbox", "name": name}
            if tag.endswith(LEGACY_KIT_TAG_SUFFIX):
                return head | {
                    "sandbox": {"image": PUBLISHED_IMAGE},
                    "commands": {"startup": [{"command": ["launcher"]}]},
                    "caps": {"network": {"allow": []}},
                }
            return head | {
                "sandbox": {"image": PUBLISHED_IMAGE, "entrypoint": ["launcher"]},
                "permissions": {"network": {"allow": []}},
            }
        raise Fail(f"ERROR: kit not found: {ref}")
    spec_path = path / "spec.yaml"
    if not spec_path.is_file():
        raise Fail(f"ERROR: no spec.yaml in kit {ref}")
    data = yaml.safe_load(spec_path.read_text())
    return data if isinstance(data, dict) else {}


def cmd_run(store: Store, argv: list[str]) -> int:
    a = Args(
        argv,
        values={"--name", "-t", "--template", "--cpus", "-m", "--memory"},
        bools={"-q", "--quiet"},
        multi={"--kit"},
    )
    name = a.get("--name")
    if name and name in store.sandboxes and not a.pos and auto_stops():
        return attach_session(store, name)
    if name and name in store.sandboxes and not a.pos:
        start_sandbox(store, name)
        store.save()
        out(f"Sandbox {name} is running (simulator: no interactive session attached)")
        return 0
    if not name and a.pos and a.pos[0] in store.sandboxes:
        err(f"WARNING: `sbx run <sandbox>` is deprecated; use `sbx run --name {a.pos[0]}`")
        start_sandbox(store, a.pos[0])
        store.save()
        return 0
    return cmd_create(store, argv, run=True)


def cmd_ls(store: Store, argv: list[str]) -> int:
    a = Args(argv, values=set(), bools={"--json", "-q", "--quiet"})
    boxes = sorted(store.sandboxes.values(), key=lambda s: s["name"])
    if a.get("--json"):
        rows = []
        for sb in boxes:
            row = {
                "name": sb["name"],
                "id": sb["id"],
                "agent": sb["agent"],
                "status": sb["status"],
                "ports": [],
            }
            if modern():
                row |= {
                    "created_at": sb["created_at"],
                    "last_used_at": sb["created_at"],
                    "workspaces": sb["workspaces"],
                    "workspace_missing": False,
                }
            rows.append(row)
        # v0.34 leaves the key out on an empty machine (BAND staging-smoke/setup.sh).
        out(json.dumps({"sandboxes": rows} if rows or modern() else {}))
        return 0
    if a.get("-q", "--quiet"):
        for sb in boxes:
            out(sb["name"])
        return 0
    out(f"{'SANDBOX':<24} {'AGENT':<18} {'STATUS':<9} {'PORTS':<6} WORKSPACE")
    for sb in boxes:
        out(
            f"{sb['name']:<24} {sb['agent']:<18} {sb['status']:<9} {'':<6} "
            f"{', '.join(sb['workspaces'])}"
        )
    return 0


def cmd_stop(store: Store, argv: list[str]) -> int:
    a = Args(argv, values=set(), bools=set())
    if not a.pos:
        raise Fail("ERROR: requires at least 1 arg(s): SANDBOX")
    for name in a.pos:
        if name not in store.sandboxes:
            raise Fail(f"ERROR: sandbox {name!r} not found")
        stop_sandbox(store, name)
        out(f"Stopped {name}")
    store.save()
    return 0


def cmd_rm(store: Store, argv: list[str]) -> int:
    a = Args(argv, values=set(), bools={"-f", "--force", "--all"})
    names = sorted(store.sandboxes) if a.get("--all") else a.pos
    for name in names:
        if name not in store.sandboxes:
            raise Fail(f"ERROR: sandbox {name!r} not found")
    if not a.get("-f", "--force"):
        err(f"Remove {len(names)} sandbox(es) {', '.join(names)}? [y/N] ")
        answer = sys.stdin.readline().strip().lower() if not sys.stdin.closed else ""
        if answer not in ("y", "yes"):
            err("Cancelled.")  # non-interactive: nothing removed (INFERRED: exit 0)
            return 0
    for name in names:
        stop_sandbox(store, name)
        vm = store.root / "vms" / store.sandboxes[name]["id"]
        if vm.exists():
            backing().remove(vm, name)
        del store.sandboxes[name]
        if vtuple() >= (0, 40, 0):  # ISS #445: rm deletes the sandbox's own secrets
            _drop_secrets(store, lambda e, n=name: e["scope"] == n)
        out(f"Removed {name}")
    store.save()
    return 0


def _drop_secrets(store: Store, match: Any) -> int:
    count = 0
    for bucket in ("secrets", "custom"):
        keep = []
        for entry in store.data[bucket]:
            if match(entry):
                store.keychain.pop(entry["id"], None)
                count += 1
            else:
                keep.append(entry)
        store.data[bucket] = keep
    return count


# ---------------------------------------------------------------- secrets


def secret_scope(a: Args, store: Store) -> str | None:
    """(global), a sandbox name, or None (= every scope, for ls)."""
    sandbox = a.get("--sandbox")
    if sandbox is not None:
        if not modern():
            raise Fail("ERROR: unknown flag: --sandbox")
        return sandbox
    if a.get("-g", "--global"):
        if modern():
            err("WARNING: -g is deprecated: secrets are global by default")
        return "(global)"
    return None


def cmd_secret(store: Store, argv: list[str]) -> int:
    if not argv:
        raise Fail("ERROR: requires a subcommand: set, set-custom, ls, rm")
    sub, rest = argv[0], argv[1:]
    if sub == "set-custom":
        return secret_set_custom(store, rest)
    if sub == "set":
        return secret_set(store, rest)
    if sub in ("ls", "list"):
        return secret_ls(store, rest)
    if sub == "rm":
        return secret_rm(store, rest)
    raise Fail(f'ERROR: unknown command {sub!r} for "sbx secret"')


def _positional_scope(a: Args, store: Store, scope: str | None) -> str | None:
    """0.34/0.35: a positional sandbox name scopes the secret (before the service)."""
    if scope is None and a.pos and (a.pos[0] in store.sandboxes or a.pos[0] not in SERVICES):
        name = a.pos.pop(0)
        if modern():
            err("WARNING: a positional sandbox name is deprecated; use --sandbox")
        return name
    return scope


def secret_set_custom(store: Store, argv: list[str]) -> int:
    a = Args(
        argv,
        values={"--env", "--placeholder", "--value", "-t", "--sandbox"},
        bools={"-g", "--global"},
        multi={"--host"},
    )
    scope = _positional_scope(a, store, secret_scope(a, store))
    if scope is None:
        if not modern():
            raise Fail("ERROR: a scope is required: -g or a sandbox name")
        scope = "(global)"
    hosts: list[str] = a.get("--host") or []
    env_name = a.get("--env")
    if not hosts or not env_name:
        raise Fail("ERROR: --host and --env are required")
    value = a.get("--value", "-t")
    if value is None:
        if not modern():
            raise Fail("ERROR: a secret value is required: pass --value (or -t)")
        value = sys.stdin.read().rstrip("\r\n")
    if not value:
        raise Fail("ERROR: the secret value is empty")
    placeholder = a.get("--placeholder") or "sbx-cs-{rand}"
    generated = "{rand}" in placeholder
    placeholder = placeholder.replace("{rand}", secrets.token_hex(8))
    existing = next(
        (
            e
            for e in store.data["custom"]
            if e["scope"] == scope and e["env"] == env_name and set(e["targets"]) & set(hosts)
        ),
        None,
    )
    if existing is not None and existing["placeholder"] != placeholder:
        # INFERRED (band launch.sh): a different placeholder for an existing host/env.
        raise Fail(
            f"ERROR: a custom secret for env {env_name} on "
            f"{', '.join(sorted(set(existing['targets']) & set(hosts)))} already "
            f"exists in scope {scope} with another placeholder; remove it first"
        )
    if existing is None:
        existing = {
            "id": uuid.uuid4().hex,
            "scope": scope,
            "env": env_name,
            "created_seq": store.data.get("seq", 0) + 1,
        }
        store.data["custom"].append(existing)
    existing |= {
        "targets": sorted(set(existing.get("targets", [])) | set(hosts)),
        "placeholder": placeholder,
    }
    store.keychain[existing["id"]] = value
    store.save()
    out(
        f'Saved custom secret placeholder "{placeholder}" for target "{",".join(hosts)}" '
        f'env "{env_name}" in scope "{scope}"'
    )
    if generated:
        out(f"Generated placeholder: {placeholder}")
    if env_name in RESERVED_CUSTOM_ENVS:
        err(f"WARNING: {env_name} is reserved by a built-in service")
    return 0


def secret_set(store: Store, argv: list[str]) -> int:
    a = Args(
        argv,
        values={"-t", "--token", "--sandbox"},
        bools={"-g", "--global", "-f", "--force", "--oauth"},
    )
    scope = _positional_scope(a, store, secret_scope(a, store))
    if scope is None:
        if not modern():
            raise Fail("ERROR: a scope is required: -g or a sandbox name")
        scope = "(global)"
    if not a.pos or a.pos[0] not in SERVICES:
        raise Fail(f"ERROR: unknown service; supported: {', '.join(SERVICES)}")
    service = a.pos[0]
    existing = next(
        (e for e in store.data["secrets"] if e["scope"] == scope and e["name"] == service), None
    )
    if existing is not None and not a.get("-f", "--force"):
        err(f"A secret for {service} already exists in {scope}. Overwrite? [y/N] ")
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            return 0  # SDK37 checkNotStored: cancelled, silent exit 0
    value = a.get("-t", "--token")
    if value is None:
        value = sys.stdin.read().rstrip("\r\n")
    if not value:
        raise Fail("ERROR: the secret value is empty")
    if existing is None:
        existing = {"id": uuid.uuid4().hex, "scope": scope, "type": "service", "name": service}
        store.data["secrets"].append(existing)
    store.keychain[existing["id"]] = value
    store.save()
    out(f"Saved {service} secret in scope {scope}")
    return 0


def _in_scope(entry: dict[str, Any], scope: str | None) -> bool:
    return scope is None or entry["scope"] == scope


def secret_ls(store: Store, argv: list[str]) -> int:
    a = Args(argv, values={"--service", "--sandbox"}, bools={"-g", "--global", "--json"})
    if a.get("--json") and not modern():
        raise Fail("ERROR: unknown flag: --json")
    scope = _positional_scope(a, store, secret_scope(a, store))
    service = a.get("--service")
    plain = [
        e
        for e in store.data["secrets"]
        if _in_scope(e, scope) and (service is None or e["name"] == service)
    ]
    custom = [e for e in store.data["custom"] if _in_scope(e, scope)]
    if a.get("--json"):
        out(
            json.dumps(
                {
                    "secrets": [
                        {"scope": e["scope"], "type": e["type"], "name": e["name"]} for e in plain
                    ],
                    "custom_secrets": [
                        {
                            "scope": e["scope"],
                            "targets": e["targets"],
                            "env": e["env"],
                            "placeholder": e["placeholder"],
                        }
                        for e in custom
                    ],
                }
            )
        )
        return 0
    out(f"{'SCOPE':<20} {'TYPE':<9} {'NAME':<14} SECRET")
    for e in plain:
        out(f"{e['scope']:<20} {e['type']:<9} {e['name']:<14} ****")
    out("")
    out("CUSTOM SECRETS")
    out(f"{'SCOPE':<20} {'TARGETS':<28} {'ENV':<20} {'PLACEHOLDER':<22} SECRET")
    for e in custom:
        out(
            f"{e['scope']:<20} {','.join(e['targets']):<28} {e['env']:<20} "
            f"{e['placeholder']:<22} ****"
        )
    return 0


def secret_rm(store: Store, argv: list[str]) -> int:
    a = Args(
        argv,
        values={"--placeholder", "--registry", "--host", "--sandbox"},
        bools={"-g", "--global", "-f", "--force"},
    )
    scope = _positional_scope(a, store, secret_scope(a, store))
    if scope is None:
        if not modern():
            raise Fail("ERROR: a scope is required: -g or a sandbox name")
        scope = "(global)"
    host, placeholder = a.get("--host"), a.get("--placeholder")
    service = a.pos[0] if a.pos else None
    if host is None and placeholder is None and service is None:
        raise Fail("ERROR: name a service, --placeholder or --host")

    def match(e: dict[str, Any]) -> bool:
        if e["scope"] != scope:
            return False
        if "name" in e:
            return service is not None and e["name"] == service
        if placeholder is not None:
            return e["placeholder"] == placeholder
        if host is not None:
            single = len(e["targets"]) == 1 or modern()  # v0.34: single-host entries only
            return single and host in e["targets"]
        return False

    count = _drop_secrets(store, match)
    store.save()
    out(f"Deleted {count}")
    return 0


# ---------------------------------------------------------------- policy


def cmd_policy(store: Store, argv: list[str]) -> int:
    if not argv:
        raise Fail("ERROR: requires a subcommand")
    sub, rest = argv[0], argv[1:]
    if sub in ("init", "set-default"):
        if not rest or rest[0] not in PRESETS:
            raise Fail(f"ERROR: preset must be one of {', '.join(PRESETS)}")
        store.data["policy"] = rest[0]
        store.save()
        out(f"Network policy initialized: {rest[0]}")
        return 0
    if sub == "ls":
        return policy_ls(store, rest)
    if sub in ("allow", "deny", "rm", "check"):
        if not rest or rest[0] != "network":
            raise Fail(f"ERROR: usage: sbx policy {sub} network ...")
        return {"allow": policy_add, "deny": policy_add, "rm": policy_rm, "check": policy_check}[
            sub
        ](store, rest[1:], sub)
    raise Fail(f'ERROR: unknown command {sub!r} for "sbx policy"')


def _rule_scope(store: Store, a: Args) -> str:
    sandbox = a.get("--sandbox")
    if a.get("-g"):
        raise Fail("ERROR: unknown flag: -g (global is the default since 0.32)")
    return sandbox or "(global)"


def policy_add(store: Store, argv: list[str], decision: str) -> int:
    require_policy(store)
    a = Args(argv, values={"--sandbox"}, bools={"-g"})
    scope = _rule_scope(store, a)
    if scope != "(global)" and scope not in store.sandboxes:
        # Observed, not documented (BAND sbx_cli.py allow_network): no pre-create scoping.
        raise Fail(f"ERROR: sandbox {scope!r} not found")
    if len(a.pos) != 1:
        raise Fail("ERROR: requires exactly 1 arg: RESOURCES (comma-separated)")
    resources = [r.strip() for r in a.pos[0].split(",") if r.strip()]
    rule = {
        "id": f"rule-{store.data['next_rule']}",
        "scope": scope,
        "decision": decision,
        "resources": resources,
        "origin": "user",
    }
    store.data["next_rule"] += 1
    store.data["rules"].append(rule)
    store.save()
    out(f"Added {decision} rule {rule['id']} for {', '.join(resources)} ({scope})")
    return 0


def policy_rm(store: Store, argv: list[str], _: str) -> int:
    a = Args(argv, values={"--sandbox", "--resource", "--id"}, bools=set())
    scope = _rule_scope(store, a)
    wanted_id, resource = a.get("--id"), a.get("--resource")
    if not wanted_id and not resource:
        raise Fail("ERROR: one of --resource or --id is required")
    wanted = set((resource or "").split(",")) - {""}
    before = len(store.data["rules"])
    store.data["rules"] = [
        r
        for r in store.data["rules"]
        if not (
            r["scope"] == scope
            and (r["id"] == wanted_id or (wanted and set(r["resources"]) == wanted))
        )
    ]
    removed = before - len(store.data["rules"])
    store.save()
    if removed == 0:
        raise Fail("ERROR: no matching rule")
    out(f"Removed {removed} rule(s)")
    return 0


def _host_matches(pattern: str, host: str, port: str) -> bool:
    p_host, _, p_port = pattern.partition(":") if pattern.count(":") == 1 else (pattern, "", "")
    if p_port and p_port != port:
        return False
    if p_host == "**":
        return True
    if p_host.startswith("**."):
        return host.endswith(p_host[2:])
    if p_host.startswith("*."):
        suffix = p_host[1:]
        return host.endswith(suffix) and "." not in host[: -len(suffix)]
    return p_host == host


def decide(store: Store, scope: str, target: str) -> tuple[str, str]:
    host, _, port = target.partition(":")
    port = port or "443"
    rules = [r for r in store.data["rules"] if r["scope"] in ("(global)", scope)]
    preset = store.data["policy"] or "deny-all"
    defaults = [{"id": "preset", "decision": "allow", "resources": list(BALANCED_DEFAULTS)}]
    for decision in ("deny", "allow"):  # deny wins over allow
        pool = rules + (defaults if preset == "balanced" else [])
        for rule in pool:
            if rule["decision"] == decision and any(
                _host_matches(r, host, port) for r in rule["resources"]
            ):
                return decision, rule["id"]
    return PRESETS[preset], f"default ({preset})"


def policy_check(store: Store, argv: list[str], _: str) -> int:
    require_policy(store)
    a = Args(argv, values={"--sandbox"}, bools={"--json", "--verbose"})
    if len(a.pos) != 1:
        raise Fail("ERROR: requires exactly 1 arg: TARGET")
    decision, rule = decide(store, a.get("--sandbox") or "", a.pos[0])
    if a.get("--json"):
        out(json.dumps({"target": a.pos[0], "decision": decision, "rule": rule}))
    else:
        out(f"{a.pos[0]}: {decision.upper()} ({rule})")
    return 0 if decision == "allow" else 1


def policy_ls(store: Store, argv: list[str]) -> int:
    require_policy(store)
    a = Args(argv, values=set(), bools={"--json", "--wide"})
    scope = a.pos[0] if a.pos else None  # a nonexistent sandbox is not an error (ISS #472)
    rules = [r for r in store.data["rules"] if scope is None or r["scope"] in (scope, "(global)")]
    if a.get("--json"):
        out(
            json.dumps(
                {
                    "rules": [
                        {
                            "id": r["id"],
                            "name": r["id"],
                            "policy_id": "local",
                            "scope": "global" if r["scope"] == "(global)" else "sandbox",
                            "applies_to": r["scope"],
                            "resource_type": "network",
                            "decision": r["decision"],
                            "resources": r["resources"],
                            "origin": r["origin"],
                            "status": "active",
                        }
                        for r in rules
                    ]
                }
            )
        )
        return 0
    out(f"{'POLICY':<12} {'SOURCE':<8} {'APPLIES TO':<20} SUMMARY")
    out(f"{'default':<12} {'preset':<8} {'(global)':<20} {store.data['policy']}")
    for r in rules:
        out(
            f"{r['id']:<12} {'user':<8} {r['scope']:<20} {r['decision']} {','.join(r['resources'])}"
        )
    return 0


# ---------------------------------------------------------------- exec, kit, daemon


def cmd_exec(store: Store, argv: list[str]) -> int:
    a = Args(
        argv,
        values={"-e", "--env", "--env-file", "-w", "--workdir", "-u", "--user", "--detach-keys"},
        bools={"-d", "--detach", "-i", "-t", "--privileged", "-it"},
        multi={"-e", "--env"},
        stop_at_first_positional=True,
    )
    if len(a.pos) < 2:
        raise Fail("ERROR: requires at least 2 arg(s): SANDBOX COMMAND")
    name, command = a.pos[0], a.pos[1:]
    if name not in store.sandboxes:
        raise Fail(f"ERROR: sandbox {name!r} not found")
    start_sandbox(store, name)  # a stopped sandbox is started first
    store.save()
    env, _ = sandbox_env(store, name)
    for item in a.get("-e", "--env") or []:
        key, _, val = item.partition("=")
        env[key] = val
    env_file = a.get("--env-file")
    if env_file:
        for line in Path(env_file).read_text().splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                key, _, val = line.partition("=")
                env[key.strip()] = val
    sb = store.sandboxes[name]
    workdir = a.get("-w", "--workdir") or sb["workspaces"][0]
    store_root = store.root
    store.release()  # the command may run long (or call sbx itself)
    return int(
        backing().run_command(
            store_root / "vms" / sb["id"],
            command,
            env=env,
            workspace=sb["workspaces"][0],
            cwd=workdir,
            detach=bool(a.get("-d", "--detach")),
        )
    )


def cmd_kit(store: Store, argv: list[str]) -> int:
    if not argv or argv[0] not in ("validate", "inspect"):
        raise Fail("ERROR: usage: sbx kit validate|inspect REFERENCE")
    if len(argv) < 2:
        raise Fail("ERROR: requires exactly 1 arg: REFERENCE")
    ref = argv[1]
    if argv[0] == "validate" and (("://" not in ref and ":" in ref) or "@sha256:" in ref):
        raise Fail(
            "ERROR: OCI references are not supported for validation; "
            "pull the kit and validate the directory"
        )
    path = Path(ref)
    if not path.exists():
        raise Fail(f"ERROR: kit path not found: {ref}")
    spec_file = path / "spec.yaml"
    if not spec_file.is_file():
        raise Fail(f"ERROR: no spec.yaml in {ref}")
    import yaml

    try:
        spec = yaml.safe_load(spec_file.read_text())
    except yaml.YAMLError as exc:
        raise Fail(f"INVALID: spec.yaml is not valid YAML: {exc}") from None
    problems, warnings = _validate_spec(spec if isinstance(spec, dict) else {})
    if argv[0] == "inspect":
        out(
            json.dumps(
                {
                    "manifest": {
                        k: spec.get(k) for k in ("schemaVersion", "kind", "name", "version")
                    },
                    "caps": spec.get("caps"),
                    "credentials": spec.get("credentials"),
                    "environment": spec.get("environment"),
                    "commands": spec.get("commands"),
                    "agentContext": spec.get("agentContext"),
                    "warnings": warnings,
                }
            )
        )
        return 0
    if problems:
        raise Fail(f"INVALID: {problems[0]}")
    for w in warnings:
        err(f"WARN: {w}")
    out(f"PASS: {spec.get('name')} ({spec.get('kind')}) is valid")
    return 0


def _kit_fields() -> tuple[set[str], set[str], str]:
    """(top-level keys, sandbox keys it refuses, decoder type) for the running version.

    Before 0.38 only the 0.34-era grammar; from 0.38 the v2 decoder's fields as well;
    from 0.42.1 only the v2 decoder's fields.
    """
    v = vtuple()
    if v < (0, 38, 0):
        return KIT_COMMON_KEYS | KIT_LEGACY_KEYS, set(), "spec"
    if v < (0, 42, 1):
        return KIT_COMMON_KEYS | KIT_LEGACY_KEYS | KIT_CURRENT_KEYS, set(), "spec.specFileV2"
    return KIT_COMMON_KEYS | KIT_CURRENT_KEYS, KIT_LEGACY_SANDBOX_KEYS, "spec.specFileV2"


def _validate_spec(spec: dict[str, Any]) -> tuple[list[str], list[str]]:
    problems: list[str] = []
    top, refused_sandbox_keys, decoder = _kit_fields()
    # The decoder walks the fields in a fixed order: the 0.34-era blocks first.
    order = ["caps", "commands", "agentContext", "permissions", "agentInstructions"]
    unknown = sorted(set(spec) - top, key=lambda k: (order.index(k) if k in order else 99, k))
    sandbox = spec.get("sandbox") if isinstance(spec.get("sandbox"), dict) else {}
    unknown += sorted(set(sandbox) & refused_sandbox_keys)
    if unknown:
        problems.append(f"field {unknown[0]} not found in type {decoder}")
    entrypoint = sandbox.get("entrypoint")
    if "entrypoint" in sandbox and not (
        isinstance(entrypoint, list) and entrypoint and all(isinstance(a, str) for a in entrypoint)
    ):
        problems.append("sandbox.entrypoint must be a non-empty list of strings")
    if str(spec.get("schemaVersion")) not in ("1", "2") or not isinstance(
        spec.get("schemaVersion"), str
    ):
        problems.append('schemaVersion must be the string "1" or "2"')
    if spec.get("kind") not in ("sandbox", "mixin"):
        problems.append("kind must be sandbox or mixin")
    if not KIT_NAME_RE.match(str(spec.get("name") or "")):
        problems.append("name must match ^[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?$")
    if spec.get("kind") == "sandbox" and not (spec.get("sandbox") or {}).get("image"):
        problems.append("sandbox.image is required for sandbox kits")
    for phase in ("install", "startup"):
        for command in (spec.get("commands") or {}).get(phase) or []:
            if not command.get("command"):
                problems.append(f"commands.{phase} entries need a non-empty command")
    for key in (spec.get("environment") or {}).get("variables") or {}:
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
            problems.append(f"environment variable {key!r} is not a valid identifier")
    return problems, []


def cmd_daemon(store: Store, argv: list[str]) -> int:
    sub = argv[0] if argv else ""
    if sub == "stop":
        for name, sb in store.sandboxes.items():  # daemon stop kills the sandbox VMs
            if sb["status"] == "running":
                stop_sandbox(store, name)
        store.data["daemon"] = "stopped"
        store.save()
        out("Daemon stopped")
        return 0
    if sub == "start":
        store.data["daemon"] = "running"  # sandboxes stay stopped
        store.save()
        out("Daemon started")
        return 0
    if sub == "status":
        out(f"Daemon is {store.data['daemon']}")
        return 0
    raise Fail("ERROR: usage: sbx daemon start|stop|status")


def cmd_template(store: Store, argv: list[str]) -> int:
    sub, rest = (argv[0], argv[1:]) if argv else ("", [])
    if sub == "load" and len(rest) == 1:
        return template_load(store, rest[0])
    if sub == "ls":
        return template_ls(store, rest)
    if sub == "rm" and len(rest) == 1:
        return template_rm(store, rest[0])
    raise Fail("ERROR: usage: sbx template load FILE | ls [--json] | rm TAG|ID")


def normalize_repository(name: str) -> str:
    """Docker's reference normalization: `x` -> docker.io/library/x, `u/x` -> docker.io/u/x."""
    first = name.split("/", 1)[0]
    if "/" in name and ("." in first or ":" in first or first == "localhost"):
        return name
    return f"docker.io/{name}" if "/" in name else f"docker.io/library/{name}"


def _split_tag(ref: str) -> tuple[str, str]:
    name, _, tag = ref.rpartition(":")
    if not name or "/" in tag:
        return normalize_repository(ref), "latest"
    return normalize_repository(name), tag


def _archive_images(data: bytes) -> list[dict[str, Any]]:
    """The images a `docker save` archive holds: config digest and repo tags each.

    The checks the real load makes (INFERRED where its docs are silent): the file is a tar
    archive, it has a `manifest.json` listing images, and each image's config blob is in it.
    """
    import io
    import tarfile

    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            members = {m.name.removeprefix("./"): m for m in tar.getmembers() if m.isfile()}
            if "manifest.json" not in members:
                raise Fail("ERROR: loading template: not an image archive (no manifest.json)")
            entries = json.loads(_member(tar, members["manifest.json"]))
            images = []
            for entry in entries if isinstance(entries, list) else []:
                config = str(entry.get("Config") or "").removeprefix("./")
                if config not in members:
                    raise Fail(f"ERROR: loading template: the archive lacks its config {config}")
                blob = _member(tar, members[config])
                digest = "sha256:" + hashlib.sha256(blob).hexdigest()
                images.append({"id": digest, "tags": list(entry.get("RepoTags") or [])})
    except (tarfile.TarError, ValueError, AttributeError) as exc:
        raise Fail(f"ERROR: loading template: not an image archive ({exc})") from None
    if not images:
        raise Fail("ERROR: loading template: the archive's manifest.json lists no image")
    return images


def _member(tar: Any, member: Any) -> bytes:
    handle = tar.extractfile(member)
    if handle is None:
        raise Fail(f"ERROR: loading template: {member.name} is not a file")
    return bytes(handle.read())


def template_load(store: Store, source: str) -> int:
    try:
        data = (
            sys.stdin.buffer.read() if source in ("/dev/stdin", "-") else Path(source).read_bytes()
        )
    except OSError as exc:
        raise Fail(f"ERROR: cannot read {source}: {exc.strerror}") from None
    templates: list[dict[str, Any]] = store.data["templates"]
    for image in _archive_images(data):
        refs = [_split_tag(t) for t in image["tags"]] or [("<none>", "<none>")]
        for repository, tag in refs:
            # A tag moves to the image loaded last (docker semantics); the old entry goes.
            templates[:] = [
                t for t in templates if (t["repository"], t["tag"]) != (repository, tag)
            ]
            templates.append(
                {
                    "id": image["id"],
                    "repository": repository,
                    "tag": tag,
                    "size": len(data),
                    "created_at": now(),
                }
            )
            shown = image["id"].removeprefix("sha256:")[:12]
            out(f"Loaded image: {repository}:{tag} ({shown})")
    store.save()
    return 0


def template_ls(store: Store, argv: list[str]) -> int:
    a = Args(argv, values=set(), bools={"--json"})
    rows = [
        {
            "id": t["id"].removeprefix("sha256:")[:12],  # the short form, as sbx lists it
            "repository": t["repository"],
            "tag": t["tag"],
            "flavor": "",
            "created_at": t["created_at"],
            "size": t["size"],
        }
        for t in store.data["templates"]
    ]
    if a.get("--json"):
        out(json.dumps({"images": rows}))
        return 0
    out(f"{'REPOSITORY':<44} {'TAG':<12} {'IMAGE ID':<13} SIZE")
    for r in rows:
        out(f"{r['repository']:<44} {r['tag']:<12} {r['id']:<13} {r['size']}")
    return 0


def _template_matches(entry: dict[str, Any], ref: str) -> bool:
    short = ref.removeprefix("sha256:")
    if len(short) >= 12 and re.fullmatch(r"[0-9a-f]+", short):
        return entry["id"].removeprefix("sha256:").startswith(short)
    return (entry["repository"], entry["tag"]) == _split_tag(ref)


def template_rm(store: Store, ref: str) -> int:
    templates: list[dict[str, Any]] = store.data["templates"]
    found = [t for t in templates if _template_matches(t, ref)]
    if not found:
        raise Fail(f"ERROR: template {ref} not found")
    ids = {t["id"] for t in found}
    users = sorted(n for n, sb in store.sandboxes.items() if sb.get("template_id") in ids)
    if users:  # INFERRED: like `docker rmi`, an image a sandbox was made from stays
        raise Fail(f"ERROR: template {ref} is in use by sandbox {', '.join(users)}")
    templates[:] = [t for t in templates if t not in found]
    store.save()
    for t in found:
        out(f"Removed template {t['repository']}:{t['tag']}")
    return 0


def held_template(store: Store, image: str) -> dict[str, Any] | None:
    """The loaded template an image reference names (by tag or id), if any."""
    return next((t for t in store.data["templates"] if _template_matches(t, image)), None)


# ---------------------------------------------------------------- attach and idle (0.43+)


def read_state() -> dict[str, Any]:
    """state.json without the lock (it is replaced atomically, so always whole)."""
    path = Path(os.environ["SBX_SIM_STATE"]) / "state.json"
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return {"sandboxes": {}}
    return data


def by_id(data: dict[str, Any], sid: str) -> dict[str, Any] | None:
    return next((sb for sb in data.get("sandboxes", {}).values() if sb["id"] == sid), None)


def sessions_dir(root: Path, sid: str) -> Path:
    path = root / "sessions" / sid
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


def attached(root: Path, sid: str) -> bool:
    """Whether a live session holds its lock; a dead session's file is dropped."""
    found = False
    for lock in sessions_dir(root, sid).glob("*.lock"):
        with open(lock, "a") as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                found = True
                continue
        lock.unlink(missing_ok=True)
    return found


def spawn_watcher(store: Store, name: str) -> None:
    sb = store.sandboxes[name]
    env = {k: v for k, v in os.environ.items() if k != "BANDKIT_TAG"}
    env[WATCHER_ENV] = str(store.root)
    subprocess.Popen(
        [sys.executable, str(ENTRY), "__idle-watch", sb["id"], str(sb["boot"])],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
        close_fds=True,
    )


def idle_watch(sid: str, boot: int) -> int:
    """The daemon's idle stop for one boot of one sandbox: exits when that boot ends."""
    root = Path(os.environ["SBX_SIM_STATE"])
    idle, since, was_attached = idle_s(), time.monotonic(), False
    while True:
        time.sleep(POLL_S)
        sb = by_id(read_state(), sid)
        if sb is None or sb["status"] != "running" or sb.get("boot") != boot:
            return 0
        if attached(root, sid):
            since, was_attached = time.monotonic(), True
            continue
        if was_attached and sb.get("entrypoint"):
            _end_entrypoint(sb["name"], sid, boot)  # its last session died (kill -9)
        was_attached = False
        if time.monotonic() - since < idle:
            continue
        store = Store()
        try:
            sb = store.sandboxes.get(sb["name"])
            if sb is None or sb["id"] != sid or sb["status"] != "running" or sb["boot"] != boot:
                return 0
            if attached(root, sid):
                since = time.monotonic()
                continue
            stop_sandbox(store, sb["name"])
            sb["auto_stopped_at"] = now()
            store.save()
            with open(root / "autostop.log", "a") as fh:
                fh.write(f"{now()} {sb['name']}: no attached session for {idle:g}s, stopped\n")
            return 0
        finally:
            store.release()


def attach_session(store: Store, name: str) -> int:
    """`sbx run --name N` from 0.43: attach, run the entrypoint, hold the sandbox running."""
    if not os.isatty(0):
        raise Fail("ERROR: the input device is not a TTY: `sbx run` attaches a terminal")
    detached: list[int] = []  # a signal ends the session (the terminal closing: SIGHUP)
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, lambda s, _f: detached.append(s))
    start_sandbox(store, name)
    sb = store.sandboxes[name]
    sid, boot, root = sb["id"], sb["boot"], store.root
    vm = root / "vms" / sid
    # Locked before it has its name: an idle watcher that finds `<pid>.lock` unlocked takes
    # it for a dead session's and removes it, so the name must never be seen unlocked.
    pending = sessions_dir(root, sid) / f".{os.getpid()}.pending"
    lock = open(pending, "w")  # noqa: SIM115
    fcntl.flock(lock, fcntl.LOCK_EX)  # held while attached; the kernel drops it on death
    pending.rename(sessions_dir(root, sid) / f"{os.getpid()}.lock")
    log = vm / "startup.log"
    offset = log.stat().st_size if log.exists() else 0
    runs_agent = bool(sb.get("entrypoint"))
    if runs_agent:
        start_agent(store, name)
    store.save()
    store.release()
    out(f"Attached to sandbox {name}")
    sys.stdout.flush()
    try:
        return _hold(name, sid, boot, vm, log, offset, runs_agent, detached)
    finally:  # whatever ended the session (a crash too), the entrypoint goes with it
        lock.close()
        (sessions_dir(root, sid) / f"{os.getpid()}.lock").unlink(missing_ok=True)
        if runs_agent:
            _end_entrypoint(name, sid, boot)


def _hold(
    name: str,
    sid: str,
    boot: int,
    vm: Path,
    log: Path,
    offset: int,
    runs_agent: bool,
    detached: list[int],
) -> int:
    """Mirror the entrypoint's output until a signal, a stop or the entrypoint's exit."""
    checked = time.monotonic()
    while not detached:
        offset = _mirror(log, offset, detached)
        sb = by_id(read_state(), sid)
        if sb is None or sb["status"] != "running" or sb.get("boot") != boot:
            _say(f"Session ended: sandbox {name} is {'gone' if sb is None else 'stopped'}")
            return 0
        if runs_agent and time.monotonic() - checked >= 1.0:
            checked = time.monotonic()
            if backing().status(vm) == "stopped":
                _mirror(log, offset, detached)
                _say(f"Session ended: the entrypoint of {name} exited")
                return 1
        time.sleep(POLL_S)
    return 128 + detached[0]


def _say(text: str) -> None:
    try:
        out(text)
        sys.stdout.flush()
    except OSError:
        pass


def _mirror(log: Path, offset: int, detached: list[int]) -> int:
    """Copy what the entrypoint wrote since `offset` to the terminal (gone: detach)."""
    try:
        with open(log, "rb") as fh:
            fh.seek(offset)
            chunk = fh.read()
    except OSError:
        return offset
    if chunk:
        try:
            sys.stdout.buffer.write(chunk)
            sys.stdout.flush()
        except OSError:
            detached.append(signal.SIGHUP)  # the terminal went away
    return offset + len(chunk)


def _end_entrypoint(name: str, sid: str, boot: int) -> None:
    """The entrypoint belongs to its sessions: the last one to detach stops it."""
    store = Store()
    try:
        sb = store.sandboxes.get(name)
        if sb is None or sb["id"] != sid or sb.get("boot") != boot or attached(store.root, sid):
            return
    finally:
        store.release()  # the agent's graceful stop may take seconds: not under the lock
    backing().stop(store.root / "vms" / sid)


COMMANDS = {
    "version": cmd_version,
    "create": cmd_create,
    "run": cmd_run,
    "ls": cmd_ls,
    "list": cmd_ls,
    "stop": cmd_stop,
    "rm": cmd_rm,
    "secret": cmd_secret,
    "policy": cmd_policy,
    "exec": cmd_exec,
    "kit": cmd_kit,
    "daemon": cmd_daemon,
    "template": cmd_template,
}


def main(argv: list[str]) -> int:
    if argv[:1] == ["__idle-watch"]:
        return idle_watch(argv[1], int(argv[2]))
    log_call(argv)
    args = [a for a in argv if a not in ("-D", "--debug")]
    if not args:
        err("usage: sbx COMMAND [ARGS]")
        return 2
    handler = COMMANDS.get(args[0])
    if handler is None:
        err(f'ERROR: unknown command {args[0]!r} for "sbx"')
        return 1
    try:
        return handler(Store(), args[1:])
    except Fail as exc:
        err(str(exc))
        return exc.code
