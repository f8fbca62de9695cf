"""One recurrent PPO update of ours on maze_plr.py's shapes, timed alone: `[256, 32]` steps of
JaxUED's 13 x 13 maze observations (random, as the peer's worker draws them), LSTM 256, conv 16,
heads of 32, one minibatch, `epochs` epochs; and the forward pass the level scores read
(`value_estimates`: GAE over the values the rollout recorded, and the successors a time limit
cut), which also gives the update its values. The batch holds what the rollout records while
acting (values, carries, the LSTM's gates), stepped as the rollout steps. Settings: `agent` (the
trial's agent section), `epochs`, `runs`.

Prints one `RESULT {...}` line (protocol.py).
"""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import protocol  # noqa: E402

settings = protocol.settings()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from ajax_tune.agents import make_agent  # noqa: E402
from ajax_tune.agents.base import Carries, Clock  # noqa: E402
from ajax_tune.agents.ppo.agent import PPOTransition  # noqa: E402
from ajax_tune.config import Config  # noqa: E402
from ajax_tune.envs import make_env  # noqa: E402

T, B = 256, 32
env = make_env("jaxued/maze", height=13, width=13, n_walls=25, agent_view_size=5, max_episode_steps=250)
agent_section = {**settings["agent"], "update_epochs": settings["epochs"]}
config = Config.from_dict({"env": {"name": "jaxued/maze"}, "agent": agent_section}).agent
agent = make_agent("ppo", config, env.observation_space, env.action_space, image_shape=env.image_shape)
k = jax.random.split(jax.random.key(0), 6)
obs_shape = env.observation_space.shape
# episodes end at random (1% a step) or at the maze's time limit of 250 steps, as in a rollout on fresh levels
cut = jnp.zeros((T, B), bool).at[249].set(True)
done = (jax.random.uniform(k[1], (T, B)) < 0.01) & ~cut
batch = PPOTransition(
    obs=jax.random.uniform(k[0], (T, B, *obs_shape)),
    action=jax.random.randint(k[2], (T, B), 0, 3),
    log_prob=jnp.full((T, B), -1.1),
    reward=jax.random.uniform(k[3], (T, B)) * done,
    terminated=done,
    truncated=cut,
    valid=jnp.ones((T, B), bool),
    next_obs=jax.random.uniform(k[4], (T, B, *obs_shape)),
)
carries = Carries(start=agent.init_carry(B), reset=jnp.concatenate([jnp.zeros((1, B), bool), (done | cut)[:-1]]))
state = agent.init(jax.random.key(1))


def acting(carry, xs):
    """One step as the rollout takes it: the carry fresh where an episode starts, then the cell."""
    obs, fresh = xs
    carry = jax.tree.map(lambda z, c: jnp.where(fresh[:, None], z, c), agent.init_carry(B), carry)
    carry, features, gates = agent.trunk.step_with_gates(state.params["trunk"], carry, obs)
    return carry, (agent._value(state.params["value"], features), carry, gates)


# What the rollout records while acting: each step's value, the carry it left and the LSTM's gates
_, (value, after, gates) = jax.lax.scan(acting, carries.start, (batch.obs, carries.reset))
batch = batch.replace(value=value, after=after, gates=gates if agent.records_gates else None)
clock = Clock(jnp.float32(0.0), jnp.float32(1e7), 250)  # the env's time limit, as the loop gives it
forward = jax.jit(lambda s: agent.value_estimates(s, batch, clock, carries))
# In a level algorithm's update the values come from the scores' forward pass, as maze_plr.py's
# update takes them from its rollout: the update alone is timed with them given.
estimates = forward(state)
update = jax.jit(lambda s, key: agent.update(s, batch, key, clock, carries=carries, estimates=estimates)[0])


def seconds(fn, *args) -> tuple[float, float]:
    return protocol.median_seconds(lambda: jax.block_until_ready(fn(*args)), settings["runs"])


update_s, update_min = seconds(update, state, jax.random.key(2))
forward_s, _ = seconds(forward, state)
protocol.emit(
    {
        "side": "ajax_tune",
        "epochs": settings["epochs"],
        "update_s": round(update_s, 4),
        "update_min_s": round(update_min, 4),
        "forward_s": round(forward_s, 4),
        "versions": protocol.versions("jax", "jaxlib", "flax", "optax", "ajax-tune"),
    }
)
