"""One update of JaxUED's `examples/maze_plr.py` timed alone: its own `ActorCritic` (conv 16,
direction embedded in 5, LSTM 256, heads of 32), optimiser (clip 0.5, Adam with its linear
schedule) and `update_actor_critic_rnn` (one minibatch, `epochs` epochs) on `[256, 32]` random
maze observations; and the network's forward pass over the unroll. Settings: `jaxued_repo`,
`epochs`, `runs`. `jax.tree_map` is aliased as for the script itself.

Prints one `RESULT {...}` line (protocol.py).
"""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import protocol  # noqa: E402

settings = protocol.settings()

import jax  # noqa: E402

jax.tree_map = jax.tree_util.tree_map
sys.path.insert(0, str(pathlib.Path(settings["jaxued_repo"]).resolve() / "examples"))
import jax.numpy as jnp  # noqa: E402
import maze_plr  # noqa: E402
import optax  # noqa: E402
from flax.training.train_state import TrainState  # noqa: E402
from jaxued.environments.maze.env import Observation  # noqa: E402

T, B, epochs = 256, 32, settings["epochs"]
k = jax.random.split(jax.random.key(0), 8)
obs = Observation(image=jax.random.uniform(k[0], (T, B, 5, 5, 3)), agent_dir=jax.random.randint(k[1], (T, B), 0, 4))
dones = jax.random.uniform(k[2], (T, B)) < 0.01
network = maze_plr.ActorCritic(3)
hidden = maze_plr.ActorCritic.initialize_carry((B,))
params = network.init(jax.random.PRNGKey(0), (obs, jnp.zeros((T, B))), hidden)
schedule = lambda count: 1e-4 * (1.0 - (count // epochs) / 1000)  # noqa: E731 (its linear_schedule)
tx = optax.chain(optax.clip_by_global_norm(0.5), optax.adam(learning_rate=schedule, eps=1e-5))
train_state = TrainState.create(apply_fn=network.apply, params=params, tx=tx)
batch = (
    obs,
    jax.random.randint(k[3], (T, B), 0, 3),
    dones,
    jnp.full((T, B), -1.1),
    jax.random.normal(k[4], (T, B)),
    jax.random.normal(k[5], (T, B)),
    jax.random.normal(k[6], (T, B)),
)
update = jax.jit(lambda ts, rng: maze_plr.update_actor_critic_rnn(rng, ts, hidden, batch, B, T, 1, epochs, 0.2, 1e-3, 0.5)[0][1])
forward = jax.jit(lambda p: network.apply(p, (obs, dones), hidden)[2])


def seconds(fn, *args) -> tuple[float, float]:
    return protocol.median_seconds(lambda: jax.block_until_ready(fn(*args)), settings["runs"])


update_s, update_min = seconds(update, train_state, jax.random.PRNGKey(1))
forward_s, _ = seconds(forward, params)
protocol.emit(
    {
        "side": "jaxued",
        "epochs": epochs,
        "update_s": round(update_s, 4),
        "update_min_s": round(update_min, 4),
        "forward_s": round(forward_s, 4),
        "versions": protocol.versions("jax", "jaxlib", "flax", "optax", "jaxued", "distrax"),
    }
)
