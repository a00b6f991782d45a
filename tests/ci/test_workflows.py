"""The GitHub workflows keep the rules in the README's "CI and release workflows" section.

Each rule is checked over every workflow, so a new or edited workflow that breaks one fails
here, in `tests`, before actionlint or zizmor ever see it. The publish-specific tests pin the
order release.yml and rebuild.yml promise: gate, publish, attest the digest the task printed;
rebuild, bump the pins, open the pull request.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from bandkit.ci import lanes

REPO = Path(__file__).resolve().parents[2]
WORKFLOWS = REPO / ".github" / "workflows"
PUBLISH_TASKS = ("release.publish", "release.rebuild")
PUBLISH_WRITES = {"packages", "id-token", "attestations", "artifact-metadata"}
PIN = re.compile(r"^\s*(?:-\s+)?uses:\s+([\w.-]+/[\w./-]+)@([0-9a-f]{40}) # (v\d+(?:\.\d+)*)\s*$")
ENTRY_POINT = re.compile(r"^uv run (?:invoke [a-z][\w.-]*|nox -s \S+)(?: [^;&|`<>]*)?$")
SUDO = 'sudo -E env "PATH=$PATH" '  # Docker lanes in ci.yml only (they need root)
SECRET = re.compile(r"\$\{\{\s*secrets\.")
FORWARDED = re.compile(r"^\$\{\{ secrets\.[A-Z][A-Z0-9_]* \}\}$")


def _load(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict), path
    if True in data:  # YAML 1.1 reads the `on` key as a boolean
        data["on"] = data.pop(True)
    return data


WORKFLOW_FILES = sorted([*WORKFLOWS.glob("*.yml"), *WORKFLOWS.glob("*.yaml")])
ALL = {path.name: _load(path) for path in WORKFLOW_FILES}


def _jobs(wf: dict[str, Any]) -> dict[str, dict[str, Any]]:
    jobs = wf.get("jobs")
    assert isinstance(jobs, dict)
    assert jobs
    return jobs


def _steps() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for name, wf in ALL.items():
        for job_id, job in _jobs(wf).items():
            for step in job.get("steps", []):
                yield name, job_id, step


def _runs(job: dict[str, Any]) -> list[str]:
    return [str(step["run"]) for step in job.get("steps", []) if "run" in step]


def _publishes(job: dict[str, Any]) -> bool:
    return any(f"uv run invoke {task}" in run for run in _runs(job) for task in PUBLISH_TASKS)


def _strings(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for value in node.values():
            yield from _strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from _strings(item)
    elif isinstance(node, str):
        yield node


def _step(job: dict[str, Any], uses: str) -> list[tuple[int, dict[str, Any]]]:
    return [(i, s) for i, s in enumerate(job["steps"]) if str(s.get("uses", "")).startswith(uses)]


def test_the_repo_has_the_ci_release_and_rebuild_workflows() -> None:
    assert {"ci.yml", "release.yml", "rebuild.yml"} <= set(ALL)


def test_every_action_is_pinned_by_full_commit_sha_with_its_version() -> None:
    pins: dict[str, set[tuple[str, str]]] = {}
    for path in WORKFLOW_FILES:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.match(r"^\s*(?:-\s+)?uses:", line):
                match = PIN.match(line)
                assert match, f"{path.name}:{number}: pin by 40-hex SHA + `# vX.Y.Z`: {line}"
                pins.setdefault(match[1], set()).add((match[2], match[3]))
    for _, _, step in _steps():
        if "uses" in step:
            assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", step["uses"]), step["uses"]
    drift = {action: found for action, found in pins.items() if len(found) > 1}
    assert not drift, f"one action, one pin across workflows: {drift}"


def test_nothing_is_granted_at_the_top_and_every_job_states_its_permissions() -> None:
    for name, wf in ALL.items():
        assert wf.get("permissions") == {}, f"{name}: top-level `permissions: {{}}`"
        for job_id, job in _jobs(wf).items():
            granted = job.get("permissions")
            assert isinstance(granted, dict), f"{name}:{job_id} states its own permissions"
            assert set(granted.values()) <= {"read", "write", "none"}, (name, job_id, granted)


def test_write_scopes_only_on_the_jobs_that_publish() -> None:
    publishing = 0
    for name, wf in ALL.items():
        for job_id, job in _jobs(wf).items():
            writes = {scope for scope, level in job["permissions"].items() if level == "write"}
            if _publishes(job):
                publishing += 1
                assert job["env"] == {
                    f"INVOKE_RELEASE_{key}": f"${{{{ vars.RELEASE_{key} }}}}"
                    for key in ("HUB_IMAGE", "HUB_KIT", "GHCR_IMAGE", "GHCR_KIT")
                }, f"{name}:{job_id}: the four registry names, from repository variables"
                assert writes <= PUBLISH_WRITES, (name, job_id, writes - PUBLISH_WRITES)
                assert job.get("environment") == "release", f"{name}:{job_id}"
            else:
                assert not writes, f"{name}:{job_id} writes {sorted(writes)} but publishes nothing"
    assert publishing == 2  # release.yml's publish, rebuild.yml's rebuild


def test_every_run_step_is_one_entry_point_line() -> None:
    for name, job_id, step in _steps():
        if "run" not in step:
            assert "uses" in step, (name, job_id, step)
            continue
        run = str(step["run"]).strip()
        where = f"{name}:{job_id}: {run!r}"
        assert "\n" not in run, f"one line, one entry point: {where}"
        assert "${{" not in run, f"pass expressions through env:, never into run: {where}"
        assert "$(" not in run, where
        if run.startswith(SUDO):
            assert name == "ci.yml", where
            assert step.get("if") == "matrix.docker", where
            run = run.removeprefix(SUDO)
        assert ENTRY_POINT.match(run), f"`uv run invoke ...` or `uv run nox -s ...`: {where}"
        assert "shell" not in step, where


def test_every_entry_point_a_workflow_names_exists() -> None:
    from tasks import ns

    noxfile = ast.parse((REPO / "noxfile.py").read_text(encoding="utf-8"))
    sessions = {node.name for node in noxfile.body if isinstance(node, ast.FunctionDef)}
    for name, job_id, step in _steps():
        run = str(step.get("run", ""))
        for task in re.findall(r"uv run invoke (\S+)", run):
            assert task in ns.task_names, f"{name}:{job_id}: no invoke task {task!r}"
        for session in re.findall(r"uv run nox -s (\w+)", run):
            assert session in sessions, f"{name}:{job_id}: no nox session {session!r}"


def test_secrets_are_forwarded_by_name_into_steps_and_never_inherited() -> None:
    for path in WORKFLOW_FILES:
        assert not re.search(r"secrets:\s*inherit", path.read_text(encoding="utf-8")), path.name
    for name, wf in ALL.items():
        assert not any(SECRET.search(s) for s in _strings(wf.get("env", {}))), name
        for job_id, job in _jobs(wf).items():
            outside_steps = {k: v for k, v in job.items() if k != "steps"}
            assert not any(SECRET.search(s) for s in _strings(outside_steps)), (name, job_id)
            for step in job.get("steps", []):
                for key in ("with", "env"):
                    for value in _strings(step.get(key, {})):
                        if SECRET.search(value):
                            assert FORWARDED.match(value), f"{name}:{job_id}: {value!r}"
                            if "GITHUB_TOKEN" not in value:
                                assert job.get("environment"), f"{name}:{job_id}: {value}"


def test_publishing_shares_one_fifo_concurrency_group() -> None:
    groups: dict[str, str] = {}
    for name, wf in ALL.items():
        concurrency = wf.get("concurrency") or {}
        if any(_publishes(job) for job in _jobs(wf).values()):
            assert concurrency.get("cancel-in-progress") is False, name
            assert concurrency.get("queue") == "max", f"{name}: queue every run, in order"
            assert "${{" not in concurrency["group"], f"{name}: one constant group"
            groups[name] = concurrency["group"]
            for job_id, job in _jobs(wf).items():
                assert "concurrency" not in job, f"{name}:{job_id}: the workflow's group only"
    assert set(groups) == {"release.yml", "rebuild.yml"}
    assert len(set(groups.values())) == 1, groups
    (group,) = set(groups.values())
    others = [n for n, wf in ALL.items() if n not in groups and group in str(wf.get("concurrency"))]
    assert not others


def test_checkouts_keep_no_credentials_and_publishing_restores_no_cache() -> None:
    for name, wf in ALL.items():
        publishes = any(_publishes(job) for job in _jobs(wf).values())
        for job_id, job in _jobs(wf).items():
            for _, step in _step(job, "actions/checkout@"):
                assert step.get("with", {}).get("persist-credentials") is False, (name, job_id)
            for _, step in _step(job, "astral-sh/setup-uv@"):
                if publishes:
                    assert step.get("with", {}).get("enable-cache") is False, (name, job_id)
    assert not any("pull_request_target" in str(wf["on"]) for wf in ALL.values())


def _attests(job: dict[str, Any], task: str) -> None:
    """The publish step has an id; the attestation after it takes that step's outputs."""
    steps = job["steps"]
    (at,) = [i for i, s in enumerate(steps) if f"uv run invoke {task}" in str(s.get("run"))]
    step_id = steps[at]["id"]
    ((where, attest),) = _step(job, "actions/attest-build-provenance@")
    assert where > at
    assert attest["with"] == {
        "subject-name": f"${{{{ steps.{step_id}.outputs.subject }}}}",
        "subject-digest": f"${{{{ steps.{step_id}.outputs.digest }}}}",
        "push-to-registry": True,
    }
    logins = [i for i, _ in _step(job, "docker/login-action@")]
    assert len(logins) == 2  # both registries
    assert max(logins) < at  # logged in before publishing


def test_release_gates_then_publishes_the_tag_then_attests_its_digest() -> None:
    wf = ALL["release.yml"]
    assert wf["on"] == {"push": {"tags": ["v*.*.*"]}}
    jobs = _jobs(wf)
    assert _runs(jobs["gate"]) == ["uv run invoke release.lock-age"]
    assert jobs["publish"]["needs"] == "gate"
    assert 'uv run invoke release.publish --version "${GITHUB_REF_NAME#v}"' in _runs(
        jobs["publish"]
    )
    _attests(jobs["publish"], "release.publish")


def test_rebuild_runs_weekly_then_bumps_the_pins_in_a_pull_request() -> None:
    wf = ALL["rebuild.yml"]
    assert set(wf["on"]) == {"schedule", "workflow_dispatch"}
    assert [entry["cron"] for entry in wf["on"]["schedule"]] == ["0 5 * * 1"]
    jobs = _jobs(wf)
    _attests(jobs["rebuild"], "release.rebuild")
    bump = jobs["bump-pins"]
    assert bump["needs"] == "rebuild"
    assert _runs(bump) == ["uv run invoke kit.bump-bases"]
    ((run_at, _),) = [(i, s) for i, s in enumerate(bump["steps"]) if "run" in s]
    ((token_at, token),) = _step(bump, "actions/create-github-app-token@")
    ((pr_at, pr),) = _step(bump, "peter-evans/create-pull-request@")
    assert run_at < token_at < pr_at
    assert pr["with"]["token"] == f"${{{{ steps.{token['id']}.outputs.token }}}}"
    assert {"permission-contents", "permission-pull-requests"} <= set(token["with"])


def test_image_tests_run_on_pull_requests() -> None:
    wf = ALL["ci.yml"]
    assert "pull_request" in wf["on"]
    docker = [lane for lane in lanes.LANES if lane.docker]
    assert [lane.session for lane in docker] == ["docker_tests", "cluster_tests"]
    check = _jobs(wf)["check"]
    assert "needs.lanes.outputs.matrix" in str(check["strategy"]["matrix"])
    assert f'{SUDO}uv run nox -s "$SESSION"' in _runs(check)


def test_readme_states_the_publish_queue_and_contract_the_workflows_use() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## CI and release workflows") :].split("\n## ", 1)[0]
    assert ALL["release.yml"]["concurrency"]["group"] in section
    release = (WORKFLOWS / "release.yml").read_text(encoding="utf-8")
    for fact in ("digest=sha256:", "subject=", "version=", "dist/release.json", "$GITHUB_OUTPUT"):
        assert fact in section, fact
        assert fact in release, fact
    for name in ALL:
        assert f"`{name}`" in section, name
    for key in ("HUB_IMAGE", "HUB_KIT", "GHCR_IMAGE", "GHCR_KIT"):
        assert f"RELEASE_{key}" in section, key
