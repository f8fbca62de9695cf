"""Editing a training state's lanes on the host, between calls: tasks, held-out tasks, traced
settings, random streams.

Lanes are members x seeds, members-major (lane = member * num_seeds + seed). Every edit returns a
new state of the same shapes and dtypes, so the compiled program takes it as it is: setting a
task or a hyperparameter never recompiles. Values are validated before anything changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from ajax_tune.agents.base import AgentBase
from ajax_tune.agents.hparams import lanes_hparams
from ajax_tune.envs.base import task_to_jax
from ajax_tune.envs.wrappers import VecEnv
from ajax_tune.errors import ConfigError
from ajax_tune.fields import static_values
from ajax_tune.loop.state import TrainState


class Lanes:
    def __init__(self, venv: VecEnv, agent, num_members: int, num_seeds: int, num_heldout: int):
        if int(num_members) < 1:
            raise ConfigError(f"a population needs at least one member, got {num_members}")
        self.venv, self.env, self.agent = venv, venv.env, agent
        self.num_members, self.num_seeds, self.num_heldout = int(num_members), int(num_seeds), int(num_heldout)

    @property
    def count(self) -> int:
        return self.num_members * self.num_seeds

    def of_member(self, member: int) -> slice:
        """The lanes of one member (its seeds)."""
        return slice(member * self.num_seeds, (member + 1) * self.num_seeds)

    def keys(self, seeds: Sequence[int]) -> jax.Array:
        """Each member's seeds from its seed: those a single run with that seed would have."""
        if len(seeds) != self.num_members:
            raise ConfigError(f"init takes one seed or one per member ({self.num_members}), got {len(seeds)}")
        return jnp.concatenate([jax.random.split(jax.random.PRNGKey(s), self.num_seeds) for s in seeds])

    # -- tasks ---------------------------------------------------------------------------

    def set_task(
        self, state: TrainState, task: Mapping, eval_task: Mapping | None = None, lanes: slice | None = None
    ) -> TrainState:
        """Apply a task (one for all envs, or one per env) to every lane, or only to `lanes`
        (one member's); validated first.

        Evaluations follow `eval_task`, by default the task itself or, for a per-env batch, the
        task of env 0. Envs whose task changed start a new episode at the next unroll."""
        current = self.get_task(state, per_env=True, lanes=lanes)
        new = self.env.validate_task(task, num_envs=self.venv.num_envs, current=current)
        if eval_task is not None:
            eval_new = self.env.validate_task(eval_task)
        else:
            eval_new = {k: (v[0] if v.ndim > len(self.env.task_spec[k].shape) else v) for k, v in new.items()}
        set_one = jax.vmap(self.venv.set_task, in_axes=(0, None))
        if lanes is None:
            count = self.count
            return state.replace(
                env=set_one(state.env, task_to_jax(new)),
                eval_task={k: jnp.broadcast_to(jnp.asarray(v), (count, *v.shape)) for k, v in eval_new.items()},
            )
        count = len(range(*lanes.indices(self.count)))
        part = set_one(jax.tree.map(lambda x: x[lanes], state.env), task_to_jax(new))
        return state.replace(
            env=jax.tree.map(lambda whole, x: whole.at[lanes].set(x), state.env, part),
            eval_task={
                k: state.eval_task[k].at[lanes].set(jnp.broadcast_to(jnp.asarray(v), (count, *v.shape)))
                for k, v in eval_new.items()
            },
        )

    def get_task(self, state: TrainState, per_env: bool = False, lanes: slice | None = None) -> dict[str, np.ndarray]:
        """The evaluation task (or each env's task) of lane 0, or of the first of `lanes`, as
        numpy arrays (the lanes of a member run the same tasks)."""
        source = state.env.task if per_env else state.eval_task
        lane = 0 if lanes is None else lanes.start
        return {k: np.asarray(v[lane]) for k, v in source.items()}

    def set_heldout(self, state: TrainState, tasks: Mapping) -> TrainState:
        """The fixed tasks evaluated beside the current one: each field with a leading axis of
        `num_heldout` (validated like any per-env task batch)."""
        if not self.num_heldout:
            raise ConfigError("this loop was built without held-out tasks (num_heldout=0)")
        batch = self.env.validate_task(tasks, num_envs=self.num_heldout)
        for name, value in batch.items():
            if value.shape[:1] != (self.num_heldout,):
                batch[name] = np.broadcast_to(value, (self.num_heldout, *value.shape))
        return state.replace(heldout={k: jnp.broadcast_to(jnp.asarray(v), (self.count, *v.shape)) for k, v in batch.items()})

    # -- traced settings and random streams ------------------------------------------------

    def set_hparams(
        self, state: TrainState, agent_config=None, total_timesteps: int | Sequence[int] | None = None, ued_config=None
    ) -> TrainState:
        """New traced hyperparameters for the rest of the run, without recompiling: one agent
        config (and horizon, and level algorithm's settings) for every lane, or a sequence of one
        per member."""
        if agent_config is not None:
            configs = list(agent_config) if isinstance(agent_config, Sequence) else [agent_config]
            for config in configs:
                if static_values(config) != static_values(self.agent.config):
                    raise ConfigError("set_hparams changes only traced fields; static fields differ: rebuild the loop")
            if len(configs) not in (1, self.num_members):
                raise ConfigError(
                    f"set_hparams takes one agent config or one per member ({self.num_members}), got {len(configs)}"
                )
            if self._hparams_on_host:
                agent = self.agent.with_lane_hparams(state.agent, configs, self.count // len(configs))
            elif len(configs) == 1:
                agent = jax.vmap(self.agent.with_hparams, in_axes=(0, None))(state.agent, configs[0])
            else:
                agent = self._per_member_hparams(state.agent, configs)
            state = state.replace(agent=agent)
        if total_timesteps is not None:
            horizons = list(total_timesteps) if isinstance(total_timesteps, Sequence) else [total_timesteps] * self.num_members
            if len(horizons) != self.num_members:
                raise ConfigError(f"set_hparams takes one horizon or one per member ({self.num_members}), got {len(horizons)}")
            per_lane = np.repeat(np.asarray(horizons, np.float32), self.num_seeds)
            state = state.replace(horizon=jnp.asarray(per_lane, state.horizon.dtype))
        if ued_config is not None and state.ued is not None:
            configs = list(ued_config) if isinstance(ued_config, Sequence) else [ued_config] * self.num_members
            if len(configs) != self.num_members:
                raise ConfigError(f"set_hparams takes one ued config or one per member ({self.num_members}), got {len(configs)}")
            hp = lanes_hparams(state.ued.hp, configs, self.num_seeds)
            state = state.replace(ued=state.ued.replace(hp=hp))
        return state

    @property
    def _hparams_on_host(self) -> bool:
        """Whether the agent's traced settings are its state's `hp` alone (the built-in agents'
        `with_hparams`), so that each lane's values can be made on the host."""
        cls = type(self.agent)
        return getattr(cls, "with_hparams", None) is AgentBase.with_hparams and hasattr(cls, "with_lane_hparams")

    def _per_member_hparams(self, agent_state, configs: list):
        """Each member's config on its own lanes. Every config is applied to all lanes, which
        returns each leaf it leaves alone as the very array it was given; only the leaves some
        config changed (the traced settings) are assembled, member by member, from their lanes.
        Slicing and joining every leaf instead (parameters, optimiser state, replay buffer) was
        3.5-5x slower in a fresh process (the retired population_setup study, benchmarks/README.md)."""
        versions = [jax.vmap(self.agent.with_hparams, in_axes=(0, None))(agent_state, c) for c in configs]
        lanes = [self.of_member(m) for m in range(len(configs))]

        def join(old, *new):
            if all(n is old for n in new):
                return old
            return jnp.concatenate([n[lane] for n, lane in zip(new, lanes, strict=True)])

        return jax.tree.map(join, agent_state, *versions)

    def reseed(self, state: TrainState, salt: int) -> TrainState:
        """The same state with every lane's random stream re-keyed by `salt`."""
        return state.replace(key=jax.vmap(lambda k: jax.random.fold_in(k, salt))(state.key))
