"""The kit spec in both shapes: schema checks, drift pins (launch shape, exact allowlist),
digest stamping, the kit.validate / kit.stamp tasks. `LEGACY` is the legacy shape
(sbx-below-0.42.1/spec.yaml), `SPEC` the current one (the kit directory's spec.yaml)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from bandkit.image.facts import SPEC, SPEC_LEGACY
from bandkit.kit import spec as kitspec
from launcher.constants import DEFAULT_SDK_PYTHON

DIGEST = "sha256:" + "0123456789abcdef" * 4
REF = "127.0.0.1:5000/band-python-kit:1.2.3"
LEGACY = SPEC_LEGACY


def spec_text() -> str:
    """The legacy shape's text."""
    return LEGACY.read_text(encoding="utf-8")


def test_repo_spec_passes_our_schema_checks() -> None:
    verdict = kitspec.validate_text(spec_text())
    assert verdict.ok, verdict.problems
    assert verdict.render(LEGACY) == f"PASS {LEGACY} (schema)"


def test_drift_launch_shape_is_entrypoint_then_sdk_python_launcher() -> None:
    data = yaml.safe_load(spec_text())
    (startup,) = data["commands"]["startup"]
    assert startup["command"] == [
        "/usr/local/bin/band-entrypoint.sh",
        DEFAULT_SDK_PYTHON,
        "-m",
        "launcher",
    ]
    assert startup["user"] == "0"
    assert startup["background"] is True
    assert "entrypoint" not in data["sandbox"]
    assert data["sandbox"]["image"] == "band-python-kit:local"
    assert data["name"] == "band-python-kit"
    assert data["schemaVersion"] == "2"


def test_drift_allowlist_is_exactly_band_and_pypi() -> None:
    data = yaml.safe_load(spec_text())
    assert data["caps"]["network"]["allow"] == ["app.band.ai", "pypi.org", "files.pythonhosted.org"]
    assert "credentials" not in data
    assert "environment" not in data


def test_drift_spec_entrypoint_is_the_one_the_dockerfile_installs(repo_root: Path) -> None:
    dockerfile = (repo_root / "docker/band_python_kit/Dockerfile").read_text()
    assert f'ENTRYPOINT ["{kitspec.ENTRYPOINT}"]' in dockerfile


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        ("      - files.pythonhosted.org\n", "", "caps.network.allow must be exactly"),
        (
            "  - pypi.org\n",
            "  - pypi.org\n      - github.com\n",
            "caps.network.allow must be exactly",
        ),
        (", -m, launcher]", ", -m, band.docker.launcher]", "commands.startup[0].command must be"),
        ('user: "0"', 'user: "1000"', 'must run as user "0"'),
        ("aiFilename: AGENTS.md", "aiFilename: AGENTS.md\n  entrypoint: [bash]", "PTY"),
        ('schemaVersion: "2"', 'schemaVersion: "1"', "schemaVersion"),
        ("kind: sandbox", "kind: sandbox\ncredentials: []", "credentials: Extra inputs"),
        ("kind: sandbox", "kind: sandbox\nenvironment:\n  HTTPS_PROXY: x", "proxy variables"),
        ("name: band-python-kit", "name: other-kit", "name must be"),
    ],
)
def test_drifted_specs_are_invalid(old: str, new: str, problem: str) -> None:
    text = spec_text()
    assert old in text
    verdict = kitspec.validate_text(text.replace(old, new, 1))
    assert not verdict.ok
    assert any(problem in p for p in verdict.problems), verdict.problems
    assert verdict.render(Path("s.yaml")).startswith("INVALID s.yaml (schema)")


def test_stamp_changes_only_the_image_line() -> None:
    text = spec_text()
    stamped = kitspec.stamp(text, REF, DIGEST)
    before, after = text.splitlines(keepends=True), stamped.splitlines(keepends=True)
    assert len(before) == len(after)
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert changed == [("  image: band-python-kit:local\n", f"  image: {REF}@{DIGEST}\n")]
    assert yaml.safe_load(stamped)["sandbox"]["image"] == f"{REF}@{DIGEST}"
    assert kitspec.validate_text(stamped).ok


def test_stamp_keeps_crlf_and_trailing_spaces() -> None:
    text = "sandbox:\r\n  image: a:local  \r\nname: x\r\n"
    assert (
        kitspec.stamp(text, REF, DIGEST) == f"sandbox:\r\n  image: {REF}@{DIGEST}  \r\nname: x\r\n"
    )


@pytest.mark.parametrize(
    "digest", ["sha256:abc", "sha256:" + "G" * 64, "md5:" + "a" * 64, DIGEST.upper()]
)
def test_stamp_rejects_malformed_digests(digest: str) -> None:
    with pytest.raises(kitspec.SpecError, match="digest must be sha256"):
        kitspec.stamp(spec_text(), REF, digest)


@pytest.mark.parametrize("ref", [f"{REF}@{DIGEST}", "has space/x", ""])
def test_stamp_rejects_bad_image_refs(ref: str) -> None:
    with pytest.raises(kitspec.SpecError, match="image ref must be"):
        kitspec.stamp(spec_text(), ref, DIGEST)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("sandbox:\n  aiFilename: x\n", "exactly one `image:` line, found 0"),
        ("sandbox:\n  image: a\nother:\n  image: b\n", "exactly one `image:` line, found 2"),
        ("other:\n  image: a\nsandbox: {}\n", "is not `sandbox.image`"),
    ],
)
def test_stamp_rejects_ambiguous_specs(text: str, message: str) -> None:
    with pytest.raises(kitspec.SpecError, match=message):
        kitspec.stamp(text, REF, DIGEST)


def _invoke(repo_root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["invoke", *args], cwd=repo_root, capture_output=True, text=True, check=False, timeout=60
    )


def test_stamp_task_writes_a_copy_and_never_touches_the_spec(
    repo_root: Path, tmp_path: Path
) -> None:
    original = SPEC.read_bytes(), LEGACY.read_bytes()
    out = tmp_path / "spec.yaml"
    proc = _invoke(
        repo_root, "kit.stamp", "--image-ref", REF, "--digest", DIGEST, "--output", str(out)
    )
    assert proc.returncode == 0, proc.stderr
    assert f"image: {REF}@{DIGEST}" in out.read_text()
    assert "permissions:" in out.read_text()  # no sbx here: the current shape by default
    assert (SPEC.read_bytes(), LEGACY.read_bytes()) == original


def test_stamp_task_fails_cleanly_on_a_bad_digest(repo_root: Path) -> None:
    proc = _invoke(repo_root, "kit.stamp", "--image-ref", REF, "--digest", "sha256:nope")
    assert proc.returncode == 1
    assert (
        proc.stderr.strip()
        == "kit.stamp: digest must be sha256:<64 lowercase hex>, got 'sha256:nope'"
    )


def test_validate_task_pass_and_invalid(repo_root: Path, tmp_path: Path) -> None:
    ok = _invoke(repo_root, "kit.validate")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("PASS ")
    bad = tmp_path / "spec.yaml"
    bad.write_text(spec_text().replace("      - pypi.org\n", ""))
    proc = _invoke(repo_root, "kit.validate", "--spec", str(bad))
    assert proc.returncode == 1
    assert proc.stdout.startswith(f"INVALID {bad}")
    assert "Traceback" not in proc.stderr


def test_validate_prefers_sbx_when_present(tmp_path: Path) -> None:
    fake = tmp_path / "sbx"
    fake.write_text(
        '#!/bin/sh\n[ "$1 $2" = "kit validate" ] && echo "spec invalid: nope" && exit 1\n'
    )
    fake.chmod(0o755)
    verdict = kitspec.validate_file(LEGACY, sbx=str(fake))
    assert (verdict.ok, verdict.source, verdict.problems) == (False, "sbx", ("spec invalid: nope",))


# The current shape (the kit directory's spec.yaml) ----------------------------------------


def current_text() -> str:
    return SPEC.read_text(encoding="utf-8")


def test_current_spec_passes_our_schema_checks() -> None:
    verdict = kitspec.validate_text(current_text())
    assert (verdict.ok, verdict.shape, verdict.problems) == (True, "current", ())
    assert verdict.render(SPEC) == f"PASS {SPEC} (schema)"


@pytest.mark.parametrize(
    ("old", "new", "problem"),
    [
        ("      - files.pythonhosted.org\n", "", "permissions.network.allow must be exactly"),
        (", -m, launcher]", ", -m, band.docker.launcher]", "sandbox.entrypoint must be"),
        ("permissions:", "ports: [8080]\npermissions:", "ports: Extra inputs"),
        ("kind: sandbox", "kind: sandbox\ncredentials: []", "credentials: Extra inputs"),
        ("kind: sandbox", "kind: sandbox\nenvironment:\n  NO_PROXY: x", "proxy variables"),
        ("name: band-python-kit", "name: other-kit", "name must be"),
        ("  entrypoint: [", "  entrypoint: [bash, ", "sandbox.entrypoint must be"),
    ],
)
def test_drifted_current_specs_are_invalid(old: str, new: str, problem: str) -> None:
    text = current_text()
    assert old in text
    verdict = kitspec.validate_text(text.replace(old, new, 1))
    assert not verdict.ok
    assert any(problem in p for p in verdict.problems), verdict.problems


@pytest.mark.parametrize(
    ("base", "extra", "legacy", "current"),
    [
        (
            "legacy",
            "agentInstructions: hi\n",
            "commands, caps, agentContext, sandbox.aiFilename",
            "agentInstructions",
        ),
        ("current", "caps: {}\n", "caps", "sandbox.entrypoint, permissions, agentInstructions"),
    ],
)
def test_a_spec_mixing_both_shapes_is_invalid_and_names_the_keys(
    base: str, extra: str, legacy: str, current: str
) -> None:
    text = (spec_text() if base == "legacy" else current_text()) + extra
    verdict = kitspec.validate_text(text)
    assert not verdict.ok
    assert verdict.problems[0].startswith(
        f"the spec mixes the legacy keys ({legacy}) with the current keys ({current})"
    )


def test_stamp_works_on_the_current_shape() -> None:
    text = current_text()
    stamped = kitspec.stamp(text, REF, DIGEST)
    before, after = text.splitlines(keepends=True), stamped.splitlines(keepends=True)
    changed = [(a, b) for a, b in zip(before, after, strict=True) if a != b]
    assert changed == [("  image: band-python-kit:local\n", f"  image: {REF}@{DIGEST}\n")]
    assert kitspec.validate_text(stamped).ok


def _fake_sbx(tmp_path: Path, version: str) -> str:
    fake = tmp_path / f"sbx-{version}"
    fake.write_text(f'#!/bin/sh\n[ "$1" = version ] && echo "sbx version v{version}"\n')
    fake.chmod(0o755)
    return str(fake)


@pytest.mark.parametrize(
    ("version", "shape"),
    [
        ("0.35.0", "legacy"),
        ("0.41.9", "legacy"),
        ("0.42.0", "legacy"),
        ("0.42.1", "current"),
        ("0.47.0", "current"),
    ],
)
def test_installed_shape_follows_the_sbx_version(tmp_path: Path, version: str, shape: str) -> None:
    assert kitspec.installed_shape(_fake_sbx(tmp_path, version)) == shape


def test_no_sbx_means_the_current_shape(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbx on it
    kitspec.installed_shape.cache_clear()
    try:
        assert kitspec.installed_shape() == "current"
        assert kitspec.default_spec(kitspec.resolve_shape("auto")) == SPEC
    finally:
        kitspec.installed_shape.cache_clear()


def test_resolve_shape_and_default_spec() -> None:
    assert kitspec.default_spec(kitspec.resolve_shape("legacy")) == LEGACY
    assert kitspec.default_spec(kitspec.resolve_shape("current")) == SPEC
    with pytest.raises(kitspec.SpecError, match="--spec-shape must be one of"):
        kitspec.resolve_shape("newest")


def test_validate_file_hands_sbx_a_dir_with_the_file_as_spec_yaml(tmp_path: Path) -> None:
    fake = tmp_path / "sbx"
    fake.write_text('#!/bin/sh\ngrep -m 1 "^name:" "$3/spec.yaml"; exit 1\n')
    fake.chmod(0o755)
    other = tmp_path / "stamped.yaml"
    other.write_text(current_text().replace("name: band-python-kit", "name: renamed"))
    verdict = kitspec.validate_file(other, sbx=str(fake))
    assert verdict.problems == ("name: renamed",)


def test_validate_task_spec_shapes(repo_root: Path) -> None:
    for shape, path in (("legacy", LEGACY), ("current", SPEC)):
        proc = _invoke(repo_root, "kit.validate", "--spec-shape", shape)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith(f"PASS {path} "), proc.stdout
    bad = _invoke(repo_root, "kit.validate", "--spec-shape", "newest")
    assert bad.returncode == 1
    assert "--spec-shape must be one of" in bad.stderr


def test_stamp_task_current_shape(repo_root: Path, tmp_path: Path) -> None:
    out = tmp_path / "spec.yaml"
    proc = _invoke(
        repo_root,
        "kit.stamp",
        "--image-ref",
        REF,
        "--digest",
        DIGEST,
        "--output",
        str(out),
        "--spec-shape",
        "current",
    )
    assert proc.returncode == 0, proc.stderr
    assert "agentInstructions: |" in out.read_text()
    assert f"image: {REF}@{DIGEST}" in out.read_text()
