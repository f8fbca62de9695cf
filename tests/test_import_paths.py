"""Envs and agents named by import path ("module:attribute"): no registration step, so a Tune
worker builds them from the config alone; bad names are one clear error."""

import pytest

from ajax_tune.config import Config
from ajax_tune.envs import make_env, register
from ajax_tune.errors import ConfigError
from ajax_tune.runner import Runner
from tests.support.helpers import corridor_config

ENV = {"name": "tests.support.custom_parts:short_corridor", "kwargs": {"max_episode_steps": 12}, "task": {"length": 2}}


def test_env_by_import_path():
    env = make_env("tests.support.custom_parts:short_corridor", max_episode_steps=12)
    assert env.name == "corridor" and env.max_episode_steps == 12 and env.default_task()["length"] == 3


@pytest.mark.heavy
def test_runner_trains_an_env_and_agent_named_by_import_path():
    config = corridor_config(env=ENV, agent={"name": "tests.support.custom_parts:MyPPO"})
    runner = Runner(config)
    assert type(runner.loop.agent).__name__ == "MyPPO" and runner.env.max_episode_steps == 12
    result = runner.train()
    assert result["env_steps"] == 512 and result["curriculum/task/length"] == 2
    # the config travels as text: a worker rebuilds the same trial from it
    text = Config.from_dict(config).to_dict()
    assert text["env"]["name"] == ENV["name"] and text["agent"]["name"] == "tests.support.custom_parts:MyPPO"
    assert Config.from_dict(text).static_settings() == runner.config.static_settings()


@pytest.mark.parametrize(
    "section, message",
    [
        (
            {"env": {"name": "tests.support.custom_parts:short_corridr"}},
            "env.name: 'tests.support.custom_parts' has no attribute 'short_corridr'; did you mean 'short_corridor'?",
        ),
        ({"env": {"name": "no_such_module:f"}}, "env.name: cannot import module 'no_such_module'"),
        (
            {"env": {"name": "tests.support.custom_parts:not_an_env", "kwargs": {}}},
            "must return an ajax_tune.envs.Env, got object",
        ),
        ({"env": {"name": "tests.support.custom_parts:NOT_CALLABLE", "kwargs": {}}}, "must name a callable that returns an Env"),
        ({"env": {"name": "cartpol"}}, "unknown env 'cartpol'; did you mean 'cartpole'?"),
        (
            {"agent": {"name": "tests.support.custom_parts:NoConfig"}},
            "must name an agent class whose `Config` attribute is its config",
        ),
        (
            {"agent": {"name": "tests.support.custom_parts:MyPP0"}},
            "agent.name: 'tests.support.custom_parts' has no attribute 'MyPP0'; did you mean 'MyPPO'?",
        ),
        ({"agent": {"name": "ppp"}}, "or a 'module:Class' import path, got 'ppp'; did you mean 'ppo'?"),
        ({"agent": {"name": "tests.support.custom_parts:MyPPO", "ent_coeff": 0.1}}, "did you mean agent.'ent_coef'"),
    ],
)
def test_bad_import_paths_fail_before_compiling(section, message):
    with pytest.raises(ConfigError) as info:
        Runner.check(corridor_config(**section))
    assert message in str(info.value)


def test_register_refuses_names_that_mean_something_else():
    with pytest.raises(ValueError, match="import path"):
        register("tests.support.custom_parts:short_corridor", lambda: None)
    with pytest.raises(ValueError, match="prefixes are taken"):
        register("gymnax/mine", lambda: None)


def test_one_registry_for_names_prefixes_and_import_paths():
    """The helper every registry uses: names (imported when first named), prefixes, import paths,
    and an unknown name refused with the nearest one, as a ConfigError that is also a KeyError."""
    import collections

    from ajax_tune.imports import Registry, UnknownName

    made = []
    entries = {"ordered": "collections:OrderedDict", "plain": dict}
    registry = Registry(
        "thing.name", entries, imports="module:Class", prefixes={"made/<name>": lambda rest: made.append(rest) or rest.upper()}
    )
    assert registry.resolve("ordered") is collections.OrderedDict and registry.resolve("plain") is dict
    assert registry.resolve("made/abc") == "ABC" and made == ["abc"]
    assert registry.resolve("collections:Counter") is collections.Counter
    assert registry.names() == ["ordered", "plain", "made/<name>"]
    entries["later"] = list  # held, not copied: what is added later is known at once
    assert registry.resolve("later") is list and "later" in registry and "made/x" in registry
    with pytest.raises(UnknownName) as error:
        registry.resolve("plian")
    assert str(error.value) == (
        "thing.name must be one of ['ordered', 'plain', 'later', 'made/<name>'] or a "
        "'module:Class' import path, got 'plian'; did you mean 'plain'?"
    )
    assert isinstance(error.value, ConfigError) and isinstance(error.value, KeyError)
    with pytest.raises(ConfigError, match="thing.name: 'collections' has no attribute 'Countr'; did you mean 'Counter'"):
        registry.resolve("collections:Countr")
    with pytest.raises(ConfigError, match="thing.name must be a string, got 3"):
        registry.resolve(3)
    names_only = Registry("tune.search", {"random": 1}, imports="", unknown="unknown search")
    assert str(names_only.unknown("a:b")) == "unknown search 'a:b' Known: random"
    with pytest.raises(UnknownName):
        names_only.resolve("a:b")  # no import paths here
