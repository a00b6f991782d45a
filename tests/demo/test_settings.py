"""The breaker's caps from ``DEMO_*`` variables: defaults from ``BreakerConfig()``, one
variable per field, and clear errors for bad values."""

from __future__ import annotations

import dataclasses

import pytest

from examples.docker_demo import observer
from examples.docker_demo.breaker import BreakerConfig
from examples.docker_demo.conductor import MeetingSetup
from examples.docker_demo.settings import (
    ENV_VARS,
    FIELD_DEFAULTS,
    HEADLESS_VAR,
    POLL_VAR,
    ConductorSettings,
    DemoSettingsError,
    breaker_config_from_env,
    conductor_settings_from_env,
)

FIELDS = [field.name for field in dataclasses.fields(BreakerConfig)]


def test_defaults_equal_breaker_config_field_by_field() -> None:
    config = breaker_config_from_env({})
    assert list(FIELD_DEFAULTS) == FIELDS
    for name in FIELDS:
        assert getattr(config, name) == getattr(BreakerConfig(), name) == FIELD_DEFAULTS[name]
    assert config == BreakerConfig()


def test_one_documented_variable_per_field() -> None:
    assert ENV_VARS == {
        "soft_cap": "DEMO_SOFT_CAP",
        "handoff_deadline": "DEMO_HANDOFF_DEADLINE",
        "hard_cap": "DEMO_HARD_CAP",
        "wall_clock_s": "DEMO_WALL_CLOCK_S",
        "grace_s": "DEMO_GRACE_S",
        "interactive": "DEMO_INTERACTIVE",
        "open_floor_idle_s": "DEMO_OPEN_FLOOR_IDLE_S",
    }


def other_value(name: str) -> tuple[str, object]:
    """A valid non-default value for the field: as the variable's text, and as parsed."""
    default = FIELD_DEFAULTS[name]
    if isinstance(default, bool):
        return ("false" if default else "true"), not default
    if isinstance(default, int):
        return str(default + 1), default + 1
    assert isinstance(default, float)
    return f" {default * 2 + 0.5} ", default * 2 + 0.5


@pytest.mark.parametrize("name", FIELDS)
def test_each_variable_overrides_exactly_its_field(name: str) -> None:
    text, value = other_value(name)
    config = breaker_config_from_env({ENV_VARS[name]: text})
    assert getattr(config, name) == value != FIELD_DEFAULTS[name]
    for other in FIELDS:
        if other != name:
            assert getattr(config, other) == FIELD_DEFAULTS[other], other


def test_values_are_read_in_their_usual_forms() -> None:
    env = {
        "DEMO_SOFT_CAP": " 4 ",
        "DEMO_HANDOFF_DEADLINE": "+2",
        "DEMO_HARD_CAP": "8",
        "DEMO_WALL_CLOCK_S": "1e3",
        "DEMO_GRACE_S": "0",
        "DEMO_INTERACTIVE": "ON",
        "DEMO_OPEN_FLOOR_IDLE_S": "7.5",
    }
    assert breaker_config_from_env(env) == BreakerConfig(4, 2, 8, 1000.0, 0.0, True, 7.5)


def test_empty_and_unrelated_variables_change_nothing() -> None:
    env = {var: "" for var in ENV_VARS.values()} | {HEADLESS_VAR: " ", "DEMO_TOPIC": "x"}
    assert breaker_config_from_env(env) == BreakerConfig()


@pytest.mark.parametrize(
    ("env", "interactive"),
    [
        ({HEADLESS_VAR: "1"}, False),
        ({HEADLESS_VAR: "0"}, True),
        ({HEADLESS_VAR: "yes", "DEMO_INTERACTIVE": "false"}, False),
        ({HEADLESS_VAR: "off", "DEMO_INTERACTIVE": "1"}, True),
    ],
)
def test_headless_is_the_negation_of_interactive(env: dict[str, str], interactive: bool) -> None:
    assert breaker_config_from_env(env).interactive is interactive


def test_headless_and_interactive_must_agree() -> None:
    with pytest.raises(DemoSettingsError) as caught:
        breaker_config_from_env({HEADLESS_VAR: "1", "DEMO_INTERACTIVE": "true"})
    assert caught.value.variable == HEADLESS_VAR
    assert "DEMO_HEADLESS='1' contradicts DEMO_INTERACTIVE='true'" in str(caught.value)


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("DEMO_SOFT_CAP", "ten", "a whole number of messages, 1 or more (default 10)"),
        ("DEMO_SOFT_CAP", "1.5", "a whole number"),
        ("DEMO_HANDOFF_DEADLINE", "0", "1 or more (default 3)"),
        ("DEMO_HARD_CAP", "-3", "a whole number"),
        ("DEMO_WALL_CLOCK_S", "soon", "a number of seconds, 0 or more (default 900)"),
        ("DEMO_GRACE_S", "nan", "a number of seconds"),
        ("DEMO_OPEN_FLOOR_IDLE_S", "inf", "a number of seconds"),
        ("DEMO_GRACE_S", "-1", "0 or more (default 20)"),
        ("DEMO_INTERACTIVE", "maybe", "a switch: one of 1/0, true/false, yes/no, on/off"),
        (HEADLESS_VAR, "2", "a switch"),
    ],
)
def test_bad_values_name_the_variable_and_the_form(
    variable: str, value: str, expected: str
) -> None:
    with pytest.raises(DemoSettingsError) as caught:
        breaker_config_from_env({variable: value})
    assert isinstance(caught.value, ValueError)
    assert caught.value.variable == variable
    message = str(caught.value)
    assert message.startswith(f"{variable} must be ")
    assert expected in message
    assert message.endswith(f", got {value!r}")


@pytest.mark.parametrize(
    ("env", "variable", "fragment"),
    [
        ({"DEMO_HARD_CAP": "5"}, "DEMO_HARD_CAP", "hard_cap must be greater than soft_cap"),
        ({"DEMO_SOFT_CAP": "30"}, "DEMO_HARD_CAP", "(30 + 3 = 33), got 24"),
        ({"DEMO_WALL_CLOCK_S": "0"}, "DEMO_WALL_CLOCK_S", "wall_clock_s must be"),
        ({"DEMO_OPEN_FLOOR_IDLE_S": "0"}, "DEMO_OPEN_FLOOR_IDLE_S", "more than 0"),
    ],
)
def test_values_that_do_not_fit_together(env: dict[str, str], variable: str, fragment: str) -> None:
    with pytest.raises(DemoSettingsError) as caught:
        breaker_config_from_env(env)
    message = str(caught.value)
    assert caught.value.variable == variable
    assert fragment in message
    assert all(f"{var}=" in message for var in env)  # it says what the environment set


def test_a_long_value_is_cut_in_the_message() -> None:
    with pytest.raises(DemoSettingsError) as caught:
        breaker_config_from_env({"DEMO_GRACE_S": "x" * 5000})
    assert len(str(caught.value)) < 200


def default_of(cls: type, name: str) -> object:
    return next(f.default for f in dataclasses.fields(cls) if f.name == name)


def test_the_poll_interval_has_one_default_everywhere() -> None:
    import inspect

    feed_default = inspect.signature(observer.RoomFeed).parameters["poll_interval_s"].default
    assert (
        conductor_settings_from_env({}).poll_interval_s
        == default_of(ConductorSettings, "poll_interval_s")
        == default_of(MeetingSetup, "poll_interval_s")
        == feed_default
        == observer.POLL_INTERVAL_S
    )
    assert conductor_settings_from_env({}) == ConductorSettings(BreakerConfig())


def test_the_poll_interval_comes_from_its_variable_alone() -> None:
    settings = conductor_settings_from_env({POLL_VAR: " 2.5 ", "DEMO_HARD_CAP": "30"})
    assert settings.poll_interval_s == 2.5
    assert settings.breaker == BreakerConfig(hard_cap=30)
    assert conductor_settings_from_env({POLL_VAR: ""}).poll_interval_s == observer.POLL_INTERVAL_S
    assert POLL_VAR not in ENV_VARS.values()  # not a breaker field: the breaker has no clock


@pytest.mark.parametrize("value", ["0", "-1", "soon", "inf", "nan"])
def test_a_bad_poll_interval_names_its_variable(value: str) -> None:
    with pytest.raises(DemoSettingsError) as caught:
        conductor_settings_from_env({POLL_VAR: value})
    assert caught.value.variable == POLL_VAR
    assert str(caught.value) == (
        f"{POLL_VAR} must be a number of seconds, more than 0 (default "
        f"{observer.POLL_INTERVAL_S:g}), got {value!r}"
    )
