"""`demo.up`: the three-agent design meeting, from nothing back to nothing.

`up(options)` checks everything that can be checked first (`preflight`: a `DemoError`
then, with nothing changed), then runs the phases listed in `bandkit.demo` under one
locked run manifest. SIGTERM is turned into Ctrl-C (`signals.interruptible`), so an
interruption, like a failure, leads to the teardown (held off from signals by
`signals.shielded`); `--keep` skips the teardown of a meeting that ran (`demo.down`
removes it later). The result carries the outcome, its exit code (`outcome.EXIT_CODES`)
and the timings, in seconds since `up` began: `connected` (all three agents), `verdict`
(seen by the conductor), `closed` (the meeting stopped), and `teardown` (its duration).

Each phase starts with one progress line, `demo.up: phase <name>: ...`, in the order of
`PHASES` (a `kill -9` at any of them leaves a manifest `demo.down` can finish from).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from bandkit.demo import DemoError, cast_ops, cli_image, preflight
from bandkit.demo import brains as brains_mod
from bandkit.demo.layout import DemoLayout, RunInfo
from bandkit.demo.outcome import EXIT_CODES, Outcome, from_meeting
from bandkit.demo.phases import egress_and_secrets, phase_line
from bandkit.demo.preflight import UpOptions
from bandkit.demo.presenter import Seat
from bandkit.demo.signals import interruptible, shielded
from bandkit.demo.staging import stage
from bandkit.demo.target import Target, resolve
from bandkit.demo.teardown import finish, tear_down
from bandkit.demo.transcript import Transcript
from bandkit.errors import BandkitError
from bandkit.kit.rooms import room_key
from bandkit.manifest import Kind, Manifest, ManifestError
from bandkit.runtimes.select import get_runtime
from bandkit.terminal import printable
from examples.docker_demo.cast import Role
from examples.docker_demo.conductor import Conductor, MeetingResult, MeetingSetup
from examples.docker_demo.room import RoomCallError
from examples.docker_demo.scenario import presenter_lines
from examples.docker_demo.settings import poll_interval_from_env

FAILURES: Final = (BandkitError, RoomCallError)


def say_now(line: str) -> None:
    """The default voice: stdout, flushed (a transcript is read as it happens); a line may
    quote a sandbox's text, so its control characters are escaped."""
    print(printable(line), flush=True)


@dataclass
class UpResult:
    outcome: Outcome = Outcome.FAILED
    reason: str = ""
    clean: bool = True  # the teardown left nothing (a --keep run keeps on purpose)
    kept: bool = False
    timings: dict[str, float] = field(default_factory=dict)
    meeting: MeetingResult | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.outcome if self.clean else Outcome.FAILED]


class ManifestLedger:
    """The conductor's room, recorded in the run manifest before it exists."""

    def __init__(self, manifest: Manifest, layout: DemoLayout, info: RunInfo, target: Target):
        self._manifest, self._layout, self._info, self._target = manifest, layout, info, target

    def before_room(self, title: str) -> None:
        url = self._target.rest_url
        self._manifest.record(
            Kind.ROOM, room_key(url, title), url=url, title=title, **self._target.platform
        )

    def room_created(self, title: str, room_id: str) -> None:
        entry = self._manifest.find(Kind.ROOM, room_key(self._target.rest_url, title))
        if entry is not None:
            self._manifest.update(entry, id=room_id)
        page = self._target.ui_template.format(
            chat_id=room_id, rest_url=self._target.rest_url.rstrip("/")
        )
        self._layout.write_info(self._info.model_copy(update={"room_url": page}))


def up(
    options: UpOptions,
    *,
    env: Mapping[str, str] | None = None,
    log: Callable[[str], None] = say_now,
) -> UpResult:
    """Run the demo; raises `DemoError` only when nothing was created."""
    env = dict(os.environ) if env is None else dict(env)
    log(phase_line("preflight", "options, caps, the runtime's tools, nothing left over"))
    plan = preflight.check(options, env)
    try:
        poll_interval_s = poll_interval_from_env(env)
    except ValueError as exc:
        raise DemoError(str(exc)) from None
    layout = DemoLayout.for_run_dir(options.run_dir)
    layout.make_home()
    probe = preflight.ready_runtime(plan.runtime, layout, options.brains)
    with interruptible():
        try:
            with Manifest.open(layout.manifest, secrets=plan.known_secrets) as manifest:
                preflight.refuse_to_clobber(manifest, probe)
                with Transcript(layout.transcript, log, hide=plan.known_secrets) as say:
                    run = DemoRun(options, plan, layout, manifest, env, say, poll_interval_s)
                    run.execute()
                    run.conclude()
                    return run.result
        except ManifestError as exc:
            raise DemoError(str(exc)) from None
        except KeyboardInterrupt:  # before the first mutation: nothing to tear down
            return UpResult(Outcome.INTERRUPTED, "interrupted before the run began")


class DemoRun:
    """One run's phases and its state between them."""

    def __init__(
        self,
        options: UpOptions,
        plan: preflight.Plan,
        layout: DemoLayout,
        manifest: Manifest,
        env: Mapping[str, str],
        say: Transcript,
        poll_interval_s: float,
    ) -> None:
        self.options, self.plan, self.layout = options, plan, layout
        self.manifest, self.env, self.say = manifest, env, say
        self.poll_interval_s = poll_interval_s
        self.started = time.monotonic()
        self.result = UpResult()
        self.user_key = ""
        self.phase = "platform"

    def _mark(self, name: str) -> None:
        self.result.timings[name] = time.monotonic() - self.started

    def execute(self) -> None:
        try:
            self._phases()
        except KeyboardInterrupt:
            self.result.outcome = Outcome.INTERRUPTED
            self.result.reason = f"interrupted during the {self.phase} phase"
            self.say(f"demo.up: {self.result.reason}; tearing down")
        except FAILURES as exc:
            self.result.outcome, self.result.reason = Outcome.FAILED, f"{self.phase}: {exc}"
            self.say(f"demo.up: the {self.phase} phase failed: {exc}")

    def _phases(self) -> None:
        plan, options, layout, say = self.plan, self.options, self.layout, self.say
        say(phase_line("provision", "the platform, stale demo agents, workspaces, the agents"))
        target = resolve(
            plan.platform, run_dir=layout.run_dir, manifest=self.manifest, env=self.env
        )
        self.user_key = target.user_key
        say.hide(target.user_key)
        for note in plan.notes:
            say(note)
        runtime = get_runtime(plan.runtime.value, run_dir=layout.runtimes, manifest=self.manifest)
        info = RunInfo(
            runtime=runtime.name.value,
            platform=target.kind.value,
            rest_url=target.rest_url,
            ws_url=target.ws_url,
            box_root=str(layout.box_root),
            scenario=plan.scenario.name,
        )
        layout.write_info(info)
        say(
            f"demo.up: scenario {plan.scenario.name!r} ({plan.scenario.summary}) on the "
            f"{target.kind.value} platform {target.rest_url}, {runtime.name.value} runtime"
        )
        self.phase = "sweep"
        cast_ops.sweep_stale(api_key=target.user_key, rest_url=target.rest_url, log=say)
        self.phase = "stage"
        workspaces = {role: self._stage(role, target) for role in Role}
        self.phase = "brains"
        brains = brains_mod.prepare(
            options.brains,
            layout=layout,
            manifest=self.manifest,
            scenario=plan.scenario,
            topic=options.topic,
            log=say,
            runtime=runtime.name,
            env=self.env,
        )
        for key in brains.hidden:
            say.hide(key)
        self.phase = "provision"
        requests = cast_ops.requests_for(
            workspaces, target.rest_url, env=brains.env, platform=target.platform
        )
        ids = cast_ops.provision_cast(
            requests, api_key=target.user_key, runtime=runtime, manifest=self.manifest, log=say
        )
        for warning in runtime.warnings:
            say(f"WARNING: {warning}")
        self.phase = "egress"
        egress_and_secrets(requests, runtime, say)
        self.phase = "sandboxes"
        say(phase_line("sandboxes", f"creating three {runtime.name.value} sandboxes"))
        kit = preflight.kit_for(runtime)
        base = cli_image.sandbox_image(options.brains, runtime.name.value)
        images: dict[Role, str | None] = dict.fromkeys(requests)
        if base is not None:  # docker, swarm: start with the dependencies in the image
            images.update(cast_ops.agent_images(requests, base=base, log=say))
            cast_ops.stage_images(runtime, images)
        cast_ops.create_sandboxes(
            requests,
            runtime=runtime,
            kit=kit,
            images=images,
            log=say,
            secrets=brains.secrets,
            egress=brains.egress,
        )
        self.phase = "connect"
        say(phase_line("connect", "waiting until the three agents are connected"))
        cast_ops.wait_connected(
            runtime, timeout_s=options.connect_timeout_s, log=say, redact=(target.user_key,)
        )
        self._mark("connected")
        self.phase = "meeting"
        say(phase_line("meeting", "the conductor opens the room and follows it"))
        self._meet(target, ids, info)

    def _stage(self, role: Role, target: Target) -> Path:
        return stage(
            self.manifest,
            self.layout.workspace(role),
            role,
            self.plan.scenario,
            topic=self.options.topic,
            rest_url=target.rest_url,
            ws_url=target.ws_url,
            brains=self.options.brains,
        )

    def _meet(self, target: Target, ids: dict[Role, str], info: RunInfo) -> None:
        setup = MeetingSetup(
            rest_url=target.rest_url,
            ws_url=target.ws_url,
            user_key=target.user_key,
            topic=self.options.topic,
            agent_ids=ids,
            breaker=self.plan.config,
            ui_url_template=target.ui_template,
            presenter_cues=tuple(presenter_lines(self.plan.scenario, topic=self.options.topic)),
            poll_interval_s=self.poll_interval_s,
        )
        ledger = ManifestLedger(self.manifest, self.layout, info, target)

        def verdict_seen() -> None:
            self.say(phase_line("verdict", "the architect ruled; the meeting closes"))

        seat = Seat(
            target,
            self.say,
            run_dir=self.layout.run_dir,
            idle_s=self.plan.config.open_floor_idle_s,
        )
        conductor = Conductor(
            setup,
            ledger=ledger,
            log=self.say,
            on_verdict=verdict_seen,
            on_room=seat.room_open,
            on_floor=seat.floor_open,
        )
        meeting = asyncio.run(conductor.run())
        if meeting.verdict_at is not None:
            self.result.timings["verdict"] = meeting.verdict_at - self.started
        self._mark("closed")
        self.result.meeting = meeting
        self.result.outcome = from_meeting(
            meeting.stop_cause, verdict_reached=meeting.verdict_reached
        )
        self.result.reason = meeting.stop_reason

    def conclude(self) -> None:
        """Tear down (unless --keep kept a meeting that ran), then the summary."""
        keep = self.options.keep and self.result.outcome is not Outcome.INTERRUPTED
        if keep:
            self.result.kept = True
            self.say("demo.up: --keep: everything stays up; `uv run invoke demo.down` removes it")
        else:
            with shielded(self.say):
                self.say(phase_line("teardown", "removing what the manifest lists, in reverse"))
                begun = time.monotonic()
                report = tear_down(self.manifest, self.layout, user_key=self.user_key, log=self.say)
                finish(self.layout, report)
                self.result.timings["teardown"] = time.monotonic() - begun
                self.result.clean = report.clean
        self._summary()

    def _summary(self) -> None:
        result = self.result
        shown = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in result.timings.items())
        self.say(f"demo.up: {result.outcome.value}: {result.reason or 'no reason given'}")
        if not result.clean:
            self.say(
                "demo.up: the teardown left resources (listed above): run `uv run invoke demo.down`"
            )
        self.say(f"demo.up: timings: {shown or 'none'}; exit code {result.exit_code}")
        self.say(f"demo.up: transcript in {self.layout.transcript}")
