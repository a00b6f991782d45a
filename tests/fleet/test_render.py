"""`fleet.render --target kubernetes` checked as far as offline tools allow: `kubectl
kustomize` builds the base; every built-in kind passes `kubernetes-validate --strict` for
Kubernetes 1.30 and 1.37 (an unknown kind is a failure here, not the tool's warning); the
Sandbox objects pass the JSON Schema written from the agent-sandbox API, and their pod
templates pass as core Pods; a deliberately broken field fails each check. The custody
properties are asserted on the built objects."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from bandkit.fleet import SANDBOX_SCHEMA, FleetError, load, render

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "fleet" / "fleet.yaml"
VERSIONS = ("1.30", "1.37")
KUBECTL = Path(sys.executable).with_name("kubectl")


def built(out: Path) -> list[dict[str, Any]]:
    """`kubectl kustomize OUT`, offline, as documents."""
    done = subprocess.run(
        [str(KUBECTL), "kustomize", str(out)],
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return [d for d in yaml.load_all(done.stdout, Loader=loader) if d]


def check(document: dict[str, Any]) -> None:
    """The offline checks for one built object; raises on the first problem."""
    if document["kind"] == "Sandbox":
        schema = json.loads(SANDBOX_SCHEMA.read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        jsonschema.validate(document, schema, format_checker=jsonschema.FormatChecker())
        template = document["spec"]["podTemplate"]
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", **template.get("metadata", {})},
            "spec": template["spec"],
        }
        for version in VERSIONS:
            kubernetes_validate.validate(pod, version, strict=True)
        return
    for version in VERSIONS:  # an unknown kind raises SchemaNotFoundError: a failure too
        kubernetes_validate.validate(document, version, strict=True)


@pytest.fixture(params=["sandbox", "deployment"])
def rendered(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, list[dict[str, Any]]]:
    out = tmp_path / "out"
    render(load(EXAMPLE), out, workload_kind=request.param, runtime_class="kata")
    return request.param, built(out)


def test_the_base_builds_and_every_object_passes_the_offline_checks(
    rendered: tuple[str, list[dict[str, Any]]],
) -> None:
    workload, documents = rendered
    kinds = sorted({d["kind"] for d in documents})
    wanted = "Sandbox" if workload == "sandbox" else "Deployment"
    assert kinds == sorted(["Namespace", "Secret", "NetworkPolicy", wanted])
    assert sum(d["kind"] == wanted for d in documents) == 3
    for document in documents:
        check(document)


def _pods(documents: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out = {}
    for d in documents:
        if d["kind"] == "Sandbox":
            out[d["metadata"]["name"]] = d["spec"]["podTemplate"]["spec"]
        elif d["kind"] == "Deployment":
            out[d["metadata"]["name"]] = d["spec"]["template"]["spec"]
    return out


def test_only_the_proxy_sidecar_mounts_the_key_and_the_pod_is_locked_down(
    rendered: tuple[str, list[dict[str, Any]]],
) -> None:
    _, documents = rendered
    secrets = {d["metadata"]["name"]: d for d in documents if d["kind"] == "Secret"}
    for name, pod in _pods(documents).items():
        assert pod["automountServiceAccountToken"] is False
        assert pod["runtimeClassName"] == "kata"
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] == 1000
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        secret_volumes = {v["name"]: v["secret"] for v in pod["volumes"] if "secret" in v}
        assert secret_volumes["agent-key"]["secretName"] == f"{name}-key"
        assert secret_volumes["proxy-token"]["secretName"] == f"{name}-proxy-token"
        assert len(secret_volumes) == 2
        assert set(secrets[f"{name}-key"]["data"]) == {"agent-key"}  # the key alone
        assert set(secrets[f"{name}-proxy-token"]["data"]) == {"token"}
        (proxy,) = pod["initContainers"]
        assert proxy["restartPolicy"] == "Always"  # a native sidecar
        (agent,) = pod["containers"]
        for container in (proxy, agent):
            context = container["securityContext"]
            assert context["readOnlyRootFilesystem"] is True
            assert context["allowPrivilegeEscalation"] is False
            assert context["capabilities"] == {"drop": ["ALL"]}
            assert set(container["resources"]) == {"requests", "limits"}
        assert [m["name"] for m in proxy["volumeMounts"]] == [
            "agent-key",
            "proxy-token",
            "proxy-tmp",
        ]
        assert [m["name"] for m in agent["volumeMounts"]] == ["tmp", "kit-logs", "kit-cache"]
        args = proxy["args"]
        assert args[args.index("--key-file") + 1] == "/run/band-key/agent-key"
        assert args[args.index("--upstream") + 1] == "https://app.band.ai"
        # the agent: the token (never the key) from its Secret, first, then URLs using it
        first, *rest = agent["env"]
        assert first == {
            "name": "BAND_PROXY_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": f"{name}-proxy-token", "key": "token"}},
        }
        env = {e["name"]: e["value"] for e in rest}
        assert env["BAND_API_KEY"] == "proxy-managed"
        assert env["BAND_REST_URL"] == "http://127.0.0.1:18080/$(BAND_PROXY_TOKEN)"
        assert env["BAND_WS_URL"] == (
            "ws://127.0.0.1:18080/$(BAND_PROXY_TOKEN)/api/v1/socket/websocket"
        )
    policies = [d for d in documents if d["kind"] == "NetworkPolicy"]
    assert len(policies) == 3
    for policy in policies:
        spec = policy["spec"]
        assert spec["policyTypes"] == ["Ingress", "Egress"]
        assert spec["ingress"] == []  # deny all ingress
        ports = sorted((p["protocol"], p["port"]) for rule in spec["egress"] for p in rule["ports"])
        assert ports == [("TCP", 53), ("TCP", 443), ("UDP", 53)]
        assert all("to" not in rule for rule in spec["egress"])


def _broken_sandbox(document: dict[str, Any], how: str) -> dict[str, Any]:
    broken = copy.deepcopy(document)
    if how == "spec field":
        broken["spec"]["replicas"] = 1  # v1alpha1's field: v1beta1 has operatingMode
    elif how == "enum":
        broken["spec"]["operatingMode"] = "Paused"
    elif how == "pod field":
        broken["spec"]["podTemplate"]["spec"]["containers"][0]["privileged"] = True
    return broken


@pytest.mark.parametrize("how", ["spec field", "enum", "pod field"])
def test_a_broken_sandbox_field_fails_the_check(tmp_path: Path, how: str) -> None:
    render(load(EXAMPLE), tmp_path / "out")
    sandbox = next(d for d in built(tmp_path / "out") if d["kind"] == "Sandbox")
    check(sandbox)
    with pytest.raises((jsonschema.ValidationError, kubernetes_validate.ValidationError)):
        check(_broken_sandbox(sandbox, how))


def test_a_broken_builtin_field_and_an_unknown_kind_fail_the_check(tmp_path: Path) -> None:
    render(load(EXAMPLE), tmp_path / "out", workload_kind="deployment")
    deployment = next(d for d in built(tmp_path / "out") if d["kind"] == "Deployment")
    broken = copy.deepcopy(deployment)
    broken["spec"]["replicaz"] = 1
    with pytest.raises(kubernetes_validate.ValidationError):
        check(broken)
    with pytest.raises(kubernetes_validate.SchemaNotFoundError):
        check({"apiVersion": "example.com/v1", "kind": "Mystery", "metadata": {"name": "m"}})


def test_a_rerender_keeps_the_keys_put_there_and_keeps_them_private(tmp_path: Path) -> None:
    out = tmp_path / "out"
    render(load(EXAMPLE), out)
    key = out / "keys" / "echo-1.key"
    token = out / "keys" / "echo-1.token"
    assert (out / "keys").stat().st_mode & 0o777 == 0o700
    assert key.stat().st_mode & 0o777 == 0o600
    assert token.stat().st_mode & 0o777 == 0o600
    first_token = token.read_text()
    assert len(first_token.strip()) >= 32
    assert first_token != (out / "keys" / "echo-2.token").read_text()
    key.write_text("band_a_real_key_canary_0123456789\n")
    render(load(EXAMPLE), out)
    assert key.read_text() == "band_a_real_key_canary_0123456789\n"
    assert token.read_text() == first_token
    assert (out / ".gitignore").read_text() == "keys/\n"
    for path in out.glob("*.yaml"):  # the key lives in keys/ only, never in a manifest
        assert "canary" not in path.read_text()


def test_the_task_renders_the_example_and_refuses_a_bad_target(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "invoke", "fleet.render", "--file", "examples/fleet/fleet.yaml"]
    out = str(tmp_path / "out")
    done = subprocess.run(
        [*argv, "--target", "kubernetes", "--out", out],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "3 agent(s)" in done.stdout
    assert f"kubectl apply -k {out}" in done.stdout
    assert sum(d["kind"] == "Sandbox" for d in built(tmp_path / "out")) == 3
    refused = subprocess.run(
        [*argv, "--target", "nomad", "--out", out],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert refused.returncode == 1
    assert "--target must be kubernetes" in refused.stderr
    assert "Traceback" not in refused.stderr


@pytest.mark.parametrize(
    ("platform", "says"),
    [
        ("http://platform.example", "plain http"),
        ("https://platform.example/api", "must be an origin"),
        ("ftp://platform.example", "must be an http(s) URL"),
    ],
)
def test_a_platform_the_sidecar_would_refuse_is_refused_at_render(
    tmp_path: Path, platform: str, says: str
) -> None:
    with pytest.raises(FleetError, match=re.escape(says)):
        render(load(EXAMPLE), tmp_path / "out", platform=platform)
    assert not (tmp_path / "out").exists()
