"""`invoke build push`: default resolution, dist/ stamping, the repo spec left alone.

No Docker here: the docker calls are replaced at the seams (`image_build.build`,
`push_dev`, `ensure_kept`); tests/docker/test_build_push.py runs the real thing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from invoke.config import Config
from invoke.context import Context

import tasks
from bandkit.dockercli import ImageError
from bandkit.image import build as image_build
from bandkit.image import push as image_push
from bandkit.image import registry as image_registry
from bandkit.image.facts import LOCAL_TAG, REGISTRY_SETTING, SPEC
from bandkit.image.push import Pushed
from bandkit.kit import build_push as shortcuts
from bandkit.kit import spec as kitspec
from tasks import shortcuts as shortcut_tasks

DIGEST = "sha256:" + "ab" * 32


def test_the_flag_wins_then_the_setting_then_the_local_registry() -> None:
    assert shortcuts.choose_registry("a.example/kit", "b.example/kit") == (
        shortcuts.RegistryChoice("a.example/kit", "--registry")
    )
    assert shortcuts.choose_registry("", "b.example/kit") == shortcuts.RegistryChoice(
        "b.example/kit", "the registry setting"
    )
    assert shortcuts.choose_registry("", "").registry == ""


def test_the_collection_has_both_verbs_and_an_empty_registry_default() -> None:
    assert {"build", "push"} <= set(tasks.ns.task_names)
    assert tasks.ns.configuration()[REGISTRY_SETTING] == ""
    assert shortcut_tasks.CONFIG == {REGISTRY_SETTING: ""}


def _context(**settings: str) -> Context:
    return Context(config=Config(overrides={**tasks.ns.configuration(), **settings}))


@pytest.mark.parametrize(
    ("settings", "flag", "expected"),
    [
        ({}, "", ("", "")),
        ({REGISTRY_SETTING: "reg.example/kit"}, "", ("", "reg.example/kit")),
        (
            {REGISTRY_SETTING: "reg.example/kit"},
            "flag.example/kit",
            ("flag.example/kit", "reg.example/kit"),
        ),
    ],
)
def test_the_push_task_hands_over_the_flag_the_setting_and_the_run_dir(
    monkeypatch: pytest.MonkeyPatch,
    settings: dict[str, str],
    flag: str,
    expected: tuple[str, str],
) -> None:
    seen: list[tuple[str, str, Path]] = []
    monkeypatch.setattr(
        shortcuts, "push_here", lambda f, c, run_dir, note: seen.append((f, c, run_dir))
    )
    shortcut_tasks.push(_context(**settings), registry=flag)
    assert seen == [(*expected, Path(".run").absolute())]


@pytest.fixture
def dist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    target = tmp_path / "dist" / "spec.yaml"
    monkeypatch.setattr(shortcuts, "DIST_SPEC", target)
    return target


def _fake_push(calls: list[tuple[str, str, str]]) -> object:
    def push_dev(source: str, registry: str, tag: str, *, progress: object) -> Pushed:
        calls.append((source, registry, tag))
        return Pushed(registry, (tag,), DIGEST)

    return push_dev


def test_no_registry_means_the_kept_local_one_and_a_stamped_dist_spec(
    dist: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo_spec = SPEC.read_bytes()
    calls: list[tuple[str, str, str]] = []
    kept: list[Path] = []

    def ensure_kept(folder: Path) -> image_registry.Kept:
        kept.append(folder)
        return image_registry.Kept("127.0.0.1:5999", 4242, started=True)

    monkeypatch.setattr(image_registry, "ensure_kept", ensure_kept)
    monkeypatch.setattr(shortcuts, "push_dev", _fake_push(calls))
    notes: list[str] = []
    published = shortcuts.push_here("", "", tmp_path / "run", note=notes.append)

    assert kept == [tmp_path / "run" / "registry"]
    assert calls == [(LOCAL_TAG, "127.0.0.1:5999/band-python-kit", "dev")]
    assert published.image_ref == "127.0.0.1:5999/band-python-kit:dev"
    stamped = dist.read_text(encoding="utf-8")
    assert yaml.safe_load(stamped)["sandbox"]["image"] == f"{published.image_ref}@{DIGEST}"
    assert kitspec.validate_text(stamped).ok
    assert SPEC.read_bytes() == repo_spec  # the repo copy is only read
    assert notes[0].startswith("no registry configured (--registry, or `registry:` in invoke")
    assert "started the local registry on 127.0.0.1:5999" in notes[0]
    assert "`uv run invoke image.registry --stop`" in notes[0]
    assert notes[1:] == [
        f"digest {DIGEST}",
        f"wrote {dist} (image: {published.image_ref}@{DIGEST})",
    ]


def test_a_configured_registry_starts_nothing(
    dist: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_local(folder: Path) -> image_registry.Kept:
        raise AssertionError("the local registry must not start")

    calls: list[tuple[str, str, str]] = []
    monkeypatch.setattr(image_registry, "ensure_kept", no_local)
    monkeypatch.setattr(shortcuts, "push_dev", _fake_push(calls))
    notes: list[str] = []
    shortcuts.push_here("", "reg.example/team/kit", tmp_path, note=notes.append)
    assert calls == [(LOCAL_TAG, "reg.example/team/kit", "dev")]
    assert notes[0] == "registry reg.example/team/kit (the registry setting)"
    assert "image: reg.example/team/kit:dev@" + DIGEST in dist.read_text(encoding="utf-8")


def test_the_working_tag_is_never_a_release_tag() -> None:
    for tag in ("1.2.3", "1.2.3-r1", "latest", "6"):
        with pytest.raises(ImageError, match="is a release tag; publish releases with"):
            image_push.push_dev(LOCAL_TAG, "127.0.0.1:5000/kit", tag)
    with pytest.raises(ImageError, match=r"HOST\[:PORT\]/NAME"):
        image_push.push_dev(LOCAL_TAG, "kit", "dev")
    assert not image_push.is_immutable(shortcuts.WORK_TAG)
    assert not image_push.is_floating(shortcuts.WORK_TAG)


@pytest.mark.parametrize(
    ("unavailable", "present", "base", "made"),
    [
        (None, True, "official", False),
        ("python:3.12: no such host", True, "local", False),
        ("python:3.12: no such host", False, "local", True),
    ],
)
def test_build_takes_the_official_bases_else_the_local_ones(
    monkeypatch: pytest.MonkeyPatch,
    unavailable: str | None,
    present: bool,
    base: str,
    made: bool,
) -> None:
    requests: list[image_build.BuildRequest] = []
    ensured: list[tuple[str, ...]] = []
    monkeypatch.setattr(shortcuts, "require_docker", lambda step: None)
    monkeypatch.setattr(shortcuts, "official_unavailable", lambda: unavailable)
    monkeypatch.setattr(shortcuts, "image_exists", lambda ref: present)
    monkeypatch.setattr(
        shortcuts.image_bases, "ensure_bases", lambda arches, progress: ensured.append(arches)
    )

    def build(request: image_build.BuildRequest, progress: object) -> list[image_build.Built]:
        requests.append(request)
        return [image_build.Built(request.tag, "linux/amd64", "sha256:1", 0.1)]

    monkeypatch.setattr(shortcuts.image_build, "build", build)
    notes: list[str] = []
    shortcuts.build_here(note=notes.append, progress=notes.append)
    assert requests == [image_build.BuildRequest(tag=LOCAL_TAG, base=base)]  # type: ignore[arg-type]
    assert bool(ensured) is made
    if unavailable:
        assert notes[0].startswith(f"official bases cannot be pulled ({unavailable}); using local")
        assert ("making the missing local bases first" in " ".join(notes)) is made
    else:
        assert notes == []


def test_a_recorded_pid_that_is_not_our_registry_is_never_signalled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / image_registry.STATE).write_text(f'{{"addr": "127.0.0.1:9", "pid": {os.getpid()}}}')
    killed: list[int] = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: killed.append(pid))
    assert image_registry.kept_status(tmp_path) is None
    assert image_registry.stop_kept(tmp_path) is None
    assert killed == []
    assert not (tmp_path / image_registry.STATE).exists()


@pytest.mark.parametrize("state", ["", "{", '{"addr": "x"}', '{"addr": "a", "pid": "nope"}'])
def test_an_unreadable_record_means_no_registry(tmp_path: Path, state: str) -> None:
    (tmp_path / image_registry.STATE).write_text(state)
    assert image_registry.kept_status(tmp_path) is None
    assert shortcuts.local_status(tmp_path).startswith("no local registry runs")


def test_the_newcomer_bench_without_a_daemon_skips_build_push_and_walks_local(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from bandkit.bench import BENCHES, newcomer

    walked: list[str] = []
    monkeypatch.setattr(newcomer, "docker_ok", lambda: False)
    monkeypatch.setattr(newcomer, "_first_agent", lambda rt: walked.append(rt) or [rt])
    assert newcomer.run() == [newcomer.SKIP, "local"]
    assert walked == ["local"]  # no docker walk without a daemon
    assert BENCHES["newcomer"].module == "newcomer"


def test_a_malformed_registry_names_where_it_came_from(tmp_path: Path) -> None:
    with pytest.raises(ImageError, match=r"got 'kit' \(the registry setting\)$"):
        shortcuts.push_here("", "kit", tmp_path, note=lambda _line: None)
    with pytest.raises(ImageError, match=r"got 'kit' \(--registry\)$"):
        shortcuts.push_here("kit", "", tmp_path, note=lambda _line: None)
    assert list(tmp_path.iterdir()) == []  # nothing started, nothing written
