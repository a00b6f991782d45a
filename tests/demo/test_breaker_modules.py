"""The breaker's split: every module behind `breaker` is pure, and `breaker` re-exports
the very objects they define (one public API, `tests/demo/test_breaker.py` unchanged)."""

from __future__ import annotations

import ast
import inspect
from types import ModuleType

import pytest

from examples.docker_demo import breaker, breaker_machine, breaker_types

IMPURE_MODULES = {"asyncio", "os", "time", "socket", "datetime", "subprocess", "random", "sys"}
IMPURE_CALLS = {"open", "print", "input", "exec", "eval", "__import__"}


@pytest.mark.parametrize("module", [breaker, breaker_types, breaker_machine])
def test_each_breaker_module_is_pure(module: ModuleType) -> None:
    tree = ast.parse(inspect.getsource(module))
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        (node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
    }
    assert imported, "the walk sees the imports"
    assert not imported & IMPURE_MODULES
    called = {
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    assert not called & IMPURE_CALLS


def test_breaker_reexports_the_defining_modules_objects() -> None:
    for name in breaker.__all__:
        obj = getattr(breaker, name)
        if name in vars(breaker_types):
            assert obj is getattr(breaker_types, name)
        elif name in vars(breaker_machine):
            assert obj is getattr(breaker_machine, name)
    assert breaker.CircuitBreaker.__module__ == breaker_machine.__name__
    assert breaker.ObservedMessage.__module__ == breaker.__name__


def test_observed_message_is_what_the_machine_reads() -> None:
    fields = {"sender_class", "timestamp", "mentions_architect", "is_final_decision"}
    fields |= {"is_presenter", "is_end_signal"}
    protocol = {
        name
        for name, value in vars(breaker_machine.Observation).items()
        if isinstance(value, property)
    }
    assert protocol == fields == set(breaker.ObservedMessage.__dataclass_fields__)
