"""A tiny env with JaxUED's `UnderspecifiedEnv` interface, for `env.name: jaxued/<module>:<factory>`.

A walk along a line: the level says how long the line is and where the walker starts; reaching
the far end pays 1 and ends the episode; the params carry a time limit, as JaxUED's envs do.
"""

import jax
import jax.numpy as jnp
from flax import struct
from gymnax.environments import spaces
from jaxued.environments import UnderspecifiedEnv


@struct.dataclass
class LineLevel:
    length: jax.Array  # int32: the end's position
    start: jax.Array  # int32
    slip: jax.Array  # float32: the chance a step goes nowhere
    name: int = struct.field(pytree_node=False, default=0)  # a static field


@struct.dataclass
class LineState:
    pos: jax.Array
    length: jax.Array
    slip: jax.Array
    time: int


@struct.dataclass
class LineParams:
    max_steps_in_episode: int = 20


class LineWalk(UnderspecifiedEnv):
    @property
    def default_params(self):
        return LineParams()

    def action_space(self, params):
        return spaces.Discrete(2)  # back, forward

    def reset_env_to_level(self, rng, level, params):
        state = LineState(pos=level.start, length=level.length, slip=level.slip, time=0)
        return self.observe(state), state

    def step_env(self, rng, state, action, params):
        moves = jax.random.uniform(rng) >= state.slip
        pos = jnp.clip(state.pos + jnp.where(moves, 2 * action - 1, 0), 0, state.length)
        state = state.replace(pos=pos, time=state.time + 1)
        at_end = pos == state.length
        done = at_end | (state.time >= params.max_steps_in_episode)
        return self.observe(state), state, at_end.astype(jnp.float32), done, {}

    @staticmethod
    def observe(state):
        return {"pos": state.pos, "left": state.length - state.pos}


def make_line(length: int = 4, start: int = 0, slip: float = 0.0):
    """`jaxued/tests.support.ued_toy:make_line`: the env and its default level."""
    level = LineLevel(length=jnp.int32(length), start=jnp.int32(start), slip=jnp.float32(slip))
    return LineWalk(), level


def make_line_with_generator(length: int = 4):
    """The mapping form: a level generator and an observation of its own besides."""
    env, level = make_line(length)

    def generate_level(key):
        return level.replace(start=jax.random.randint(key, (), 0, level.length, jnp.int32))

    return {"env": env, "level": level, "generate_level": generate_level, "observe": lambda obs: jnp.stack([obs["pos"]]) * 1.0}
