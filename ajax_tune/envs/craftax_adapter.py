"""Craftax (`craftax`) as an `Env`: symbolic observations, its `EnvParams` as the task.

- Ids: `Craftax-Classic-Symbolic-v1` and `Craftax-Symbolic-v1` (the pixel ids draw textures
  every step and are not offered).
- Task fields: the numeric fields of craftax's `EnvParams` that its step reads (Classic: the
  day's length, mob healths, spawn chances, the despawn distance; Craftax: the day's length, the
  despawn distance, the attributes' cap), traced, so a new task never recompiles. Bounds, a
  guard against typos: a chance in [0, 1], anything else from a tenth (at least 1) to ten times
  its default. `max_timesteps` is the time limit, which the episode wrapper owns.
- Resets come from a pool of start states. Craftax makes a fresh 64x64 world at every reset,
  and a vectorised reset computes it for every env at every step (a `where` picks the finished
  ones): with craftax's own auto-reset 64 envs step about 15 times slower on a CPU than without
  it. So the first reset traced makes `start_states` worlds once (seeded by `start_seed`, with
  the default parameters, outside the training program) and every reset draws one of them;
  `start_states: 0` makes a fresh world at every reset instead, as craftax does. The pool's
  worlds keep the default parameters' start (the first cows' health, say); the task's
  parameters act from the first step on.
- Episodes: `terminated` is craftax's natural end (death, or lava in Craftax) without its time
  limit, which craftax folds into `done`; that limit (10,000 steps in Classic, 100,000 in
  Craftax) is `max_episode_steps`.
- Observations: craftax's symbolic vector (float32 in [0, 1]); in Classic it starts with the
  7x9 local map (21 channels: blocks and mobs, one-hot), declared as `image_shape`.
"""

from __future__ import annotations

import math

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
from craftax.craftax_env import make_craftax_env_from_name

from ajax_tune.envs.base import EnvState, TaskField, check_integer
from ajax_tune.envs.suite import SuiteEnv, strongly_typed, time_limit, unknown_id

IDS = ("Craftax-Classic-Symbolic-v1", "Craftax-Symbolic-v1")
PIXELS = ("Craftax-Classic-Pixels-v1", "Craftax-Pixels-v1")
TIME_LIMIT_FIELD = "max_timesteps"
CLASSIC_IMAGE = (7, 9, 21)  # the local map Classic's symbolic observation starts with
DEFAULT_START_STATES = {"Craftax-Classic-Symbolic-v1": 256, "Craftax-Symbolic-v1": 32}  # 21 KB and 270 KB a world


def field_bounds(name: str, default: float) -> tuple[float, float]:
    """The range a task field may take (see the module docstring)."""
    if "chance" in name:
        return 0.0, 1.0
    return float(max(1, math.ceil(default / 10))), float(default * 10)


class CraftaxEnv(SuiteEnv):
    """`make_craftax_env_from_name(env_id, auto_reset=False)`, resets drawn from a pool.

    Craftax's `EnvState` is kept whole in `EnvState.physics`.
    """

    def __init__(self, env_id: str, max_episode_steps: int | None = None, start_states: int | None = None, start_seed: int = 0):
        if env_id in PIXELS:
            raise KeyError(
                f"craftax/{env_id}: pixel observations are not offered; use craftax/{env_id.replace('Pixels', 'Symbolic')}"
            )
        if env_id not in IDS:
            raise unknown_id("craftax", env_id, IDS)
        self.name = f"craftax/{env_id}"
        self.craftax_env = make_craftax_env_from_name(env_id, auto_reset=False)
        defaults = self.craftax_env.default_params
        self.max_episode_steps, self.params = time_limit(self.name, defaults, TIME_LIMIT_FIELD, max_episode_steps, keep=False)
        if start_states is not None:
            check_integer(self.name, "start_states", start_states, 0, " (0: a fresh world at every reset)")
        self.start_states = DEFAULT_START_STATES[env_id] if start_states is None else int(start_states)
        self.start_seed = int(start_seed)
        self._pool = None

        self.task_spec = {}
        for name in type(defaults).__dataclass_fields__:
            value = getattr(defaults, name)
            if name == TIME_LIMIT_FIELD or isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float)):
                continue
            low, high = field_bounds(name, value)
            dtype = np.int32 if isinstance(value, int) else np.float32
            self.task_spec[name] = TaskField(value, low, high, dtype, doc=f"craftax EnvParams.{name}")

        space = self.craftax_env.observation_space(defaults)
        self.observation_space = gymnasium.spaces.Box(0.0, 1.0, tuple(space.shape), np.float32)
        self.action_space = gymnasium.spaces.Discrete(int(self.craftax_env.num_actions))
        self.image_shape = CLASSIC_IMAGE if "Classic" in env_id else None

    # -- resets --------------------------------------------------------------------------

    def pool(self):
        """The start states (a pytree with a leading axis), made on first use and held as numpy
        arrays. A compiled program runs as it is called, even while another is being traced
        (a first reset is traced inside the training program), so the pool is made by one."""
        if self._pool is None:

            def make(seed):
                keys = jax.random.split(jax.random.PRNGKey(seed), self.start_states)
                return strongly_typed(jax.vmap(lambda k: self.craftax_env.reset_env(k, self.params)[1])(keys))

            seed = np.asarray(self.start_seed, np.int32)
            states = jax.jit(make).lower(jax.ShapeDtypeStruct((), np.int32)).compile()(seed)
            self._pool = jax.tree.map(np.asarray, states)
        return self._pool

    def reset(self, key, task) -> EnvState:
        key = _raw(key)
        if self.start_states:
            index = jax.random.randint(key, (), 0, self.start_states)
            state = jax.tree.map(lambda x: jnp.asarray(x)[index], self.pool())
        else:
            state = self.craftax_env.reset_env(key, self.params_for(task))[1]
        state = strongly_typed(state)
        return self.first(self.craftax_env.get_obs(state), task, state)

    # -- stepping ------------------------------------------------------------------------

    def step(self, state, action, key) -> EnvState:
        obs, physics, reward, done, _ = self.craftax_env.step_env(
            _raw(key), state.physics, self.action(action), self.params_for(state.task)
        )
        return self.stepped(state, obs, reward, done, physics)


def _raw(key: jax.Array) -> jax.Array:
    # craftax keeps keys it is given in its state, as the raw uint32 pairs its start worlds hold;
    # a typed key (gymnasium export draws them) would make states of two kinds
    return jax.random.key_data(key) if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key) else key
