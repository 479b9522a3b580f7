"""The fake mode's `ShapeEnv`, made only on demand (`counting/torch/lazy_shape_env.py`): at most once, and never
over one the mode already has."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from pytest_flopbudget._counting.torch.lazy_shape_env import LazyShapeEnv


class FakeMode:
    """What LazyShapeEnv uses of a FakeTensorMode: its `shape_env` attribute."""

    def __init__(self, shape_env: object = None) -> None:
        self.shape_env = shape_env


class StandInShapeEnv:
    """Counts constructions; the real one imports all of torch._dynamo, which this test does not need."""

    made = 0

    def __init__(self) -> None:
        StandInShapeEnv.made += 1


@pytest.fixture
def shape_envs(monkeypatch: pytest.MonkeyPatch) -> type[StandInShapeEnv]:
    monkeypatch.setattr("torch.fx.experimental.symbolic_shapes.ShapeEnv", StandInShapeEnv)
    monkeypatch.setattr(StandInShapeEnv, "made", 0)
    return StandInShapeEnv


def test_the_first_install_makes_one_and_says_so(shape_envs: type[StandInShapeEnv]) -> None:
    mode = FakeMode()
    lazy = LazyShapeEnv(mode)
    assert not lazy.installed and shape_envs.made == 0  # nothing is made up front
    assert lazy.install() is True  # made now: the failed op is worth a retry
    assert lazy.installed and isinstance(mode.shape_env, StandInShapeEnv)
    made = mode.shape_env
    assert lazy.install() is False  # already there: a retry would fail the same way
    assert lazy.get() is made and shape_envs.made == 1


def test_get_makes_one_when_needed(shape_envs: type[StandInShapeEnv]) -> None:
    mode = FakeMode()
    env = LazyShapeEnv(mode).get()
    assert isinstance(env, StandInShapeEnv) and mode.shape_env is env and shape_envs.made == 1


def test_a_mode_that_has_one_keeps_it(shape_envs: type[StandInShapeEnv]) -> None:
    existing = object()
    lazy = LazyShapeEnv(FakeMode(existing))
    assert lazy.installed
    assert lazy.install() is False
    assert lazy.get() is existing and shape_envs.made == 0
