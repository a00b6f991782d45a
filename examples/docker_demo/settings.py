"""The conductor's caps and timers, from one source.

Every default is the ``BreakerConfig()`` default, read through ``dataclasses.fields`` and never
retyped. Each field is overridden by ``DEMO_<FIELD NAME IN CAPITALS>``: ``DEMO_SOFT_CAP``,
``DEMO_HANDOFF_DEADLINE``, ``DEMO_HARD_CAP``, ``DEMO_WALL_CLOCK_S``, ``DEMO_GRACE_S``,
``DEMO_INTERACTIVE`` and ``DEMO_OPEN_FLOOR_IDLE_S``. ``DEMO_HEADLESS`` is the negation of
``DEMO_INTERACTIVE``: set alone, it decides ``interactive``; set together, the two must agree.
An empty value counts as unset.

The conductor's own timer, ``poll_interval_s`` (how often it reads the room while the
WebSocket is down), comes from ``DEMO_POLL_INTERVAL_S`` the same way; its default is
``observer.POLL_INTERVAL_S``, the ``RoomFeed`` and ``MeetingSetup`` default, never retyped.
``conductor_settings_from_env`` returns both as ``ConductorSettings``.

Values: counts are whole numbers, times are seconds (``900`` or ``7.5``), switches are one of
``1/0, true/false, yes/no, on/off`` (any case). A bad value raises ``DemoSettingsError`` (a
``ValueError``) naming the variable, the expected form and the value given.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from typing import Any, Final, NoReturn

from examples.docker_demo.breaker import BreakerConfig
from examples.docker_demo.observer import POLL_INTERVAL_S

ENV_PREFIX: Final = "DEMO_"
HEADLESS_VAR: Final = "DEMO_HEADLESS"
DEFAULTS: Final = BreakerConfig()
# field name -> default, for every BreakerConfig field (the single source of the defaults)
FIELD_DEFAULTS: Final[Mapping[str, object]] = {
    field.name: getattr(DEFAULTS, field.name) for field in dataclasses.fields(BreakerConfig)
}
# field name -> the environment variable that overrides it
ENV_VARS: Final[Mapping[str, str]] = {name: ENV_PREFIX + name.upper() for name in FIELD_DEFAULTS}
POLL_VAR: Final = "DEMO_POLL_INTERVAL_S"

_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_FALSE: Final = frozenset({"0", "false", "no", "off"})
_WHOLE: Final = re.compile(r"[+-]?[0-9]+")
_SHOWN_CHARS: Final = 40  # a quoted value is cut to this many characters in a message


class DemoSettingsError(ValueError):
    """A ``DEMO_*`` variable holds a value the demo cannot use."""

    def __init__(self, variable: str, message: str) -> None:
        super().__init__(message)
        self.variable = variable


@dataclasses.dataclass(frozen=True)
class ConductorSettings:
    """Everything the conductor reads from ``DEMO_*``: the breaker's caps and its poll timer."""

    breaker: BreakerConfig = DEFAULTS
    poll_interval_s: float = POLL_INTERVAL_S


def conductor_settings_from_env(env: Mapping[str, str]) -> ConductorSettings:
    """``breaker_config_from_env`` plus ``poll_interval_from_env``."""
    return ConductorSettings(breaker_config_from_env(env), poll_interval_from_env(env))


def poll_interval_from_env(env: Mapping[str, str]) -> float:
    """``DEMO_POLL_INTERVAL_S`` (seconds, more than 0), else ``observer.POLL_INTERVAL_S``."""
    raw = env.get(POLL_VAR, "").strip()
    if not raw:
        return POLL_INTERVAL_S
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        _bad(POLL_VAR, raw, f"a number of seconds, more than 0 (default {POLL_INTERVAL_S:g})")
    return seconds


def breaker_config_from_env(env: Mapping[str, str]) -> BreakerConfig:
    """The breaker's config: ``BreakerConfig()`` defaults, overridden by ``DEMO_*`` in ``env``."""
    overrides: dict[str, Any] = {}  # each value parsed to its field's type by _parse
    for name, default in FIELD_DEFAULTS.items():
        variable = ENV_VARS[name]
        raw = env.get(variable, "").strip()
        if raw:
            overrides[name] = _parse(variable, raw, default)
    headless = env.get(HEADLESS_VAR, "").strip()
    if headless:
        interactive = not _parse_switch(HEADLESS_VAR, headless)
        if overrides.get("interactive", interactive) != interactive:
            raise DemoSettingsError(
                HEADLESS_VAR,
                f"{HEADLESS_VAR}={_shown(headless)} contradicts "
                f"{ENV_VARS['interactive']}={_shown(env[ENV_VARS['interactive']])}; "
                "set only one of them, or make them agree",
            )
        overrides["interactive"] = interactive
    try:
        return dataclasses.replace(DEFAULTS, **overrides)
    except ValueError as error:  # a value out of range, or caps that do not fit together
        field = str(error).split(" ", 1)[0]  # BreakerConfig names the field first
        given = ", ".join(f"{ENV_VARS[name]}={overrides[name]}" for name in overrides)
        raise DemoSettingsError(
            ENV_VARS.get(field, ENV_PREFIX + "*"),
            f"demo caps from the environment ({given}) are not usable: {error}",
        ) from None


def _parse(variable: str, raw: str, default: object) -> object:
    """``raw`` as the type of the field's default (bool before int: a bool is an int)."""
    if isinstance(default, bool):
        return _parse_switch(variable, raw)
    if isinstance(default, int):
        if not _WHOLE.fullmatch(raw) or int(raw) < 1:
            _bad(variable, raw, f"a whole number of messages, 1 or more (default {default})")
        return int(raw)
    if isinstance(default, float):
        try:
            seconds = float(raw)
        except ValueError:
            seconds = math.nan
        if not math.isfinite(seconds) or seconds < 0:
            _bad(variable, raw, f"a number of seconds, 0 or more (default {default:g})")
        return seconds
    raise TypeError(f"no parser for {variable} (a {type(default).__name__} field)")


def _parse_switch(variable: str, raw: str) -> bool:
    word = raw.casefold()
    if word not in _TRUE | _FALSE:
        _bad(variable, raw, "a switch: one of 1/0, true/false, yes/no, on/off")
    return word in _TRUE


def _bad(variable: str, raw: str, expected: str) -> NoReturn:
    raise DemoSettingsError(variable, f"{variable} must be {expected}, got {_shown(raw)}")


def _shown(raw: str) -> str:
    return repr(raw if len(raw) <= _SHOWN_CHARS else raw[:_SHOWN_CHARS] + "...")
