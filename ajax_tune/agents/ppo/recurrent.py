"""PPO with memory, for envs whose observation does not show everything that matters (a hidden
velocity, a cue seen once, a task the dynamics imply).

A recurrent cell (GRU or LSTM) reads each encoded observation; the policy and value heads read
its output. The loop keeps one carry per env and starts a fresh one where an episode starts; the
update replays each env's unroll from the carry it began with, restarting where the loop did,
and backpropagates through the whole unroll. Minibatches are therefore whole envs' unrolls
(`num_envs / num_minibatches` envs each) rather than shuffled steps. While acting, each step also
records its value and the carry it left, so GAE and a level algorithm's scores read them rather
than replaying the unroll once more; the LSTM also records its gate activations (4 x size floats
per env step), so the update's first gradient step, whose parameters are the rollout's, reads its
forward pass instead of running the cell again. Everything else, the traced settings, the
losses, GAE and the metrics, is PPO's.
"""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from ajax_tune.agents.base import Carries, Clock
from ajax_tune.agents.encoders import ConvEncoder, make_encoder
from ajax_tune.agents.lstm import cell as lstm_cell
from ajax_tune.agents.lstm import lstm_features
from ajax_tune.agents.networks import ACTIVATIONS, dense
from ajax_tune.agents.ppo.agent import PPO, PPOState, PPOTransition
from ajax_tune.agents.ppo.config import PPOConfig
from ajax_tune.agents.ppo.losses import clipped_objective, gae, positive_advantage, successor_values


def _dense(p, x):
    """`nn.Dense` over the last axis of `x`, any leading shape, from its parameters, through
    `networks.dense`: autodiff's weight gradient over `[T, B, ...]` contracts two axes, which
    XLA's CPU backend computes far more slowly than one product of rows."""
    return dense(x, p["kernel"], p.get("bias"))


class RecurrentTrunk(nn.Module):
    """One step for a batch of envs: encode the observation, advance the cell.

    The module defines the parameters (flax's GRU and optimised LSTM cells, so their layout is
    flax's); the steps are computed by `encode` and `advance` below, the same arithmetic split in
    two: `encode` holds all that does not read the carry (the encoder and the cell's input-side
    products), so an update runs it once over a whole unroll, and `advance` is what must follow
    the carry step by step, with the cell's recurrent products as one matrix product.

    The encoder is a dense layer (`activation`), or with `agent.encoder` the conv encoder, whose
    features go to the cell as they are (JaxUED's maze_plr.py network: conv, direction
    embedding, LSTM).
    """

    cell: str
    size: int
    activation: str = "tanh"
    image_encoder: ConvEncoder | None = None

    @nn.compact
    def __call__(self, carry, obs):
        if self.image_encoder is not None:
            x = self.image_encoder(obs)
        else:
            x = ACTIVATIONS[self.activation](nn.Dense(self.size, kernel_init=nn.initializers.orthogonal(np.sqrt(2.0)))(obs))
        cell = nn.GRUCell(self.size) if self.cell == "gru" else nn.OptimizedLSTMCell(self.size)
        return cell(carry, x)

    def zeros(self, num_envs: int):
        h = jnp.zeros((num_envs, self.size), jnp.float32)
        return h if self.cell == "gru" else (h, h)

    def inputs(self, params, obs):
        """What the cell reads of observations of any leading shape: the encoder's features."""
        p = params["params"]
        if self.image_encoder is not None:
            return self.image_encoder.apply({"params": p["image_encoder"]}, obs)
        return ACTIVATIONS[self.activation](_dense(p["Dense_0"], obs))

    def encode(self, params, obs):
        """The carry-free part of a step, for observations of any leading shape: the cell's
        input-side products of `inputs`."""
        x, p = self.inputs(params, obs), params["params"]
        if self.cell == "gru":
            cell = p["GRUCell_0"]
            return tuple(_dense(cell[name], x) for name in ("ir", "iz", "in"))
        return _dense({"kernel": self.input_kernel(params)}, x)

    def input_kernel(self, params):
        """The LSTM's input-side kernels side by side, gates i, f, g, o (no bias: flax's cell
        has it on the carry side)."""
        cell = params["params"]["OptimizedLSTMCell_0"]
        return jnp.concatenate([cell[f"i{g}"]["kernel"] for g in "ifgo"], axis=-1)

    def recurrent_weights(self, params):
        """The cell's carry-side kernels side by side (one product per step) and their biases."""
        p = params["params"]
        if self.cell == "gru":
            cell = p["GRUCell_0"]
            return jnp.concatenate([cell[name]["kernel"] for name in ("hr", "hz", "hn")], axis=-1), cell["hn"]["bias"]
        cell = p["OptimizedLSTMCell_0"]
        kernel = jnp.concatenate([cell[f"h{g}"]["kernel"] for g in "ifgo"], axis=-1)
        return kernel, jnp.concatenate([cell[f"h{g}"]["bias"] for g in "ifgo"], axis=-1)

    def advance(self, weights, carry, encoded):
        """One step of the cell from `encode`'s output: the next carry and the features."""
        kernel, bias = weights
        if self.cell == "gru":
            h = carry
            i_r, i_z, i_n = encoded
            h_r, h_z, h_n = jnp.split(jnp.dot(h, kernel), 3, axis=-1)
            r = jax.nn.sigmoid(i_r + h_r)
            z = jax.nn.sigmoid(i_z + h_z)
            n = jnp.tanh(i_n + r * (h_n + bias))
            h = (1.0 - z) * n + z * h
            return h, h
        carry, _ = lstm_cell(kernel, bias, carry, encoded)
        return carry, carry[1]

    def step(self, params, carry, obs):
        """`__call__` through `encode` and `advance`."""
        return self.advance(self.recurrent_weights(params), carry, self.encode(params, obs))

    def step_with_gates(self, params, carry, obs):
        """`step` of the LSTM, also returning its gate activations `[B, 4H]` (i, f, g, o): with
        the carry the step left, all a loss's backward pass needs of the step (`features(recorded=)`)."""
        kernel, bias = self.recurrent_weights(params)
        carry, (i, f, g, o, _) = lstm_cell(kernel, bias, carry, self.encode(params, obs))
        return carry, carry[1], jnp.concatenate([i, f, g, o], axis=-1)

    def features(self, params, start, obs, reset, recorded=None):
        """The cell's outputs over `[T, B]` observations from the carries `start`, a fresh carry
        where `reset` holds: what a loss differentiates. The LSTM's backward pass is written out
        (`agents/lstm.py`); the GRU's is JAX's. `recorded` (the LSTM's): `(use, gates, after)`,
        the gate activations and carries `step_with_gates` gave under these parameters, which
        stand for the forward pass where `use` holds."""
        if self.cell == "lstm":
            weights = (self.input_kernel(params), *self.recurrent_weights(params))
            return lstm_features(*weights, start, self.inputs(params, obs), reset, recorded)
        return self.unroll(params, start, self.encode(params, obs), reset)[0]

    def unroll(self, params, start, encoded, reset):
        """The cell over `encode`'s output for `[T, B]` steps: each step's features and the carry
        after it."""
        fresh_carry, weights = self.zeros(reset.shape[1]), self.recurrent_weights(params)

        def step(carry, xs):
            encoded, fresh = xs
            carry = _where_fresh(fresh, fresh_carry, carry)
            carry, features = self.advance(weights, carry, encoded)
            return carry, (features, carry)

        # Not unrolled: on the CPU unrolling 8 steps per iteration compiled 1.6x longer and ran slower
        # (the retired recurrent study, benchmarks/README.md).
        _, (features, after) = jax.lax.scan(step, start, (encoded, reset))
        return features, after


def _where_fresh(fresh, new, carry):
    return jax.tree.map(lambda n, c: jnp.where(fresh[:, None], n, c), new, carry)


class RecurrentPPO(PPO, form="recurrent"):
    """`agent: {name: ppo, recurrent: {cell: gru, size: 128}}` builds this (see `PPO.__new__`)."""

    def __init__(self, config: PPOConfig, observation_space, action_space, image_shape=None):
        super().__init__(config, observation_space, action_space, image_shape)
        rec = config.recurrent
        self.trunk = RecurrentTrunk(rec.cell, rec.size, config.activation, make_encoder(config.encoder, image_shape))
        # The LSTM records its gates while acting, and the update's first gradient step, whose
        # parameters are the rollout's, reads them for its forward pass instead of running the
        # cell again; not where the update moves the observation normaliser first (the inputs change).
        self.records_gates = rec.cell == "lstm" and not config.normalize_observations

    # -- state ---------------------------------------------------------------------------

    def init(self, key: jax.Array) -> PPOState:
        k_trunk, k_policy, k_value = jax.random.split(key, 3)
        obs = jnp.zeros((1, *self.obs_shape), jnp.float32)
        features = jnp.zeros((1, self.trunk.size), jnp.float32)
        params = {
            "trunk": self.trunk.init(k_trunk, self.trunk.zeros(1), obs),
            "policy": self.policy.init(k_policy, features),
            "value": self.value.init(k_value, features),
        }
        return self._fresh_state(params)

    def init_carry(self, num_envs: int):
        return self.trunk.zeros(num_envs)

    # -- acting --------------------------------------------------------------------------

    def act(self, state: PPOState, obs, key, deterministic: bool = False, *, carry):
        obs, gates = self.obs_norm(state.obs_norm, obs), None
        if self.records_gates and not deterministic:
            carry, features, gates = self.trunk.step_with_gates(state.params["trunk"], carry, obs)
        else:
            carry, features = self.trunk.step(state.params["trunk"], carry, obs)
        logits = self.policy.apply(state.params["policy"], features)
        if deterministic:
            return self.to_env(self.dist.mode(logits)), {}, carry
        raw = self.dist.sample_no_postprocessing(logits, key)
        # the value and the carry left, recorded while acting: the trunk has just computed them
        value = self._value(state.params["value"], features)
        extras = {"raw_action": raw, "log_prob": self.dist.log_prob(logits, raw), "value": value, "after": carry, "gates": gates}
        return self.to_env(self.dist.postprocess(raw)), extras, carry

    def transition(self, obs, action, extras, next_state) -> PPOTransition:
        recorded = {k: extras[k] for k in ("value", "after", "gates")}
        return super().transition(obs, action, extras, next_state).replace(**recorded)

    def _replay(self, trunk_params, start, obs, reset):
        """The cell over `[T, B]` normalised observations from the `[B]` carries `start`,
        restarting where `reset` says: each step's features and the carry after it. The encoder
        and the input-side products run once over the whole unroll, not inside the loop."""
        return self.trunk.unroll(trunk_params, start, self.trunk.encode(trunk_params, obs), reset)

    # -- learning ------------------------------------------------------------------------

    def _estimates(self, params, hp, batch, reward, obs, next_obs, clock: Clock, carries: Carries = None, recorded=False):
        """`PPO._estimates` with the cell: the values the rollout recorded (`recorded`), else the
        unroll replayed for them; a successor of its own (where `successor_values` needs one)
        read by the cell from the carry its step left."""
        if recorded:
            value, after = batch.value, batch.after
        else:
            features, after = self._replay(params["trunk"], carries.start, obs, carries.reset)
            value = self._value(params["value"], features)

        def successors(steps):
            later, left = next_obs(), after
            if steps is not None:
                envs = jnp.arange(later.shape[1])
                later, left = later[steps, envs], jax.tree.map(lambda x: x[steps, envs], after)
            _, next_features = self.trunk.step(params["trunk"], left, later)
            return self._value(params["value"], next_features)

        next_value = successor_values(value, batch, clock, successors)
        advantage, target = gae(reward, value, next_value, batch.terminated, batch.truncated, hp.gamma, hp.gae_lambda)
        return value, advantage, target

    def update(self, state: PPOState, batch: PPOTransition, key, clock: Clock, *, carries: Carries, estimates=None):
        cfg, hp = self.config, state.hp
        state, mask, reward, obs, next_obs = self._normalized(state, batch)
        advantage, target = self._targets(state, batch, reward, obs, next_obs, clock, estimates, carries)
        signal = positive_advantage(advantage, mask)

        # Per env: its whole unroll ([T, ...]) and the carry it started from.
        data = self._loss_data(obs, batch, advantage, target, mask, reset=carries.reset)
        lr = clock.rate(hp.lr)
        per_minibatch = self.num_envs // cfg.num_minibatches

        # The first gradient step's forward pass is the rollout's (the same parameters and
        # inputs): its minibatch reads the gates and carries recorded while acting, where the
        # LSTM recorded them; every later step runs the cell.
        perms, loss_keys = self._shuffles(key, self.num_envs)
        perms = perms.reshape(-1, per_minibatch)  # [epochs * minibatches, envs per minibatch]
        by_env = lambda x, envs: jnp.moveaxis(x[:, envs], 1, 0)  # noqa: E731 ([T, B, ...] to [minibatches, T, envs, ...])
        # (with one minibatch its envs are in the rollout's order, `_shuffles`: the record as it is)
        first_envs = (lambda x: x) if cfg.num_minibatches == 1 else (lambda x: by_env(x, perms[:1])[0])  # noqa: E731
        record = None if batch.gates is None else jax.tree.map(first_envs, (batch.gates, batch.after))

        def loss(params, minibatch, k):
            start, steps, first = minibatch
            recorded = None if record is None else (first, *record)
            features = self.trunk.features(params["trunk"], start, steps["obs"], steps["reset"], recorded)
            logits = self.policy.apply(params["policy"], features)
            return clipped_objective(logits, lambda: self._value(params["value"], features), steps, hp, k, self.dist)

        starts = jax.tree.map(lambda x: x[perms], carries.start)
        steps_of = jax.tree.map(lambda x: by_env(x, perms), data)
        first = jnp.arange(perms.shape[0]) == 0
        state, metrics = self._minibatch_steps(state, loss, (starts, steps_of, first), loss_keys, lr, hp)
        return state, metrics, signal
