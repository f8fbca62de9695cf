"""Envs and agents named by import path ("module:attribute"): no registration step, so a Tune
worker builds them from the config alone; bad names are one clear error."""

import pytest
from helpers import corridor_config

from ajax_tune.config import Config, ConfigError
from ajax_tune.envs import make_env, register
from ajax_tune.runner import Runner

ENV = {"name": "custom_parts:short_corridor", "kwargs": {"max_episode_steps": 12}, "task": {"length": 2}}


def test_env_by_import_path():
    env = make_env("custom_parts:short_corridor", max_episode_steps=12)
    assert env.name == "corridor" and env.max_episode_steps == 12 and env.default_task()["length"] == 3


def test_runner_trains_an_env_and_agent_named_by_import_path():
    config = corridor_config(env=ENV, agent={"name": "custom_parts:MyPPO"})
    runner = Runner(config)
    assert type(runner.loop.agent).__name__ == "MyPPO" and runner.env.max_episode_steps == 12
    result = runner.train()
    assert result["env_steps"] == 512 and result["curriculum/task/length"] == 2
    # the config travels as text: a worker rebuilds the same trial from it
    text = Config.from_dict(config).to_dict()
    assert text["env"]["name"] == ENV["name"] and text["agent"]["name"] == "custom_parts:MyPPO"
    assert Config.from_dict(text).static_settings() == runner.config.static_settings()


@pytest.mark.parametrize("section, message", [
    ({"env": {"name": "custom_parts:short_corridr"}}, "env.name: 'custom_parts' has no attribute 'short_corridr'; "
                                                      "did you mean 'short_corridor'?"),
    ({"env": {"name": "no_such_module:f"}}, "env.name: cannot import module 'no_such_module'"),
    ({"env": {"name": "custom_parts:not_an_env", "kwargs": {}}}, "must return an ajax_tune.envs.Env, got object"),
    ({"env": {"name": "custom_parts:NOT_CALLABLE", "kwargs": {}}}, "must name a callable that returns an Env"),
    ({"env": {"name": "cartpol"}}, "unknown env 'cartpol'; did you mean 'cartpole'?"),
    ({"agent": {"name": "custom_parts:NoConfig"}}, "must name an agent class whose `Config` attribute is its config"),
    ({"agent": {"name": "custom_parts:MyPP0"}}, "agent.name: 'custom_parts' has no attribute 'MyPP0'; "
                                                "did you mean 'MyPPO'?"),
    ({"agent": {"name": "ppp"}}, "agent.name must be one of ['dqn', 'ppo', 'sac'] or a 'module:Class' import path, got 'ppp'; "
                                 "did you mean 'ppo'?"),
    ({"agent": {"name": "custom_parts:MyPPO", "ent_coeff": 0.1}}, "did you mean agent.'ent_coef'"),
])
def test_bad_import_paths_fail_before_compiling(section, message):
    with pytest.raises(ConfigError) as info:
        Runner.check(corridor_config(**section))
    assert message in str(info.value)


def test_register_refuses_names_that_mean_something_else():
    with pytest.raises(ValueError, match="import path"):
        register("custom_parts:short_corridor", lambda: None)
    with pytest.raises(ValueError, match="prefixes are taken"):
        register("gymnax/mine", lambda: None)
