"""One TD3 gradient step on a batch, wherever the batch comes from: TD3 draws it from its replay
buffer, TD3+BC from a dataset. Extra terms of the actor's objective (`offpolicy.LossTerm`) are
given to the learner, so TD3+BC is TD3's step with one term more, not a copy of it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax

from ajax_tune.agents.offpolicy import ActorTermInputs, LossTerm, add_terms, twin_critic_loss
from ajax_tune.agents.td3.losses import smoothed_action, td3_target


class TD3Learner:
    def __init__(self, actor, critic, optimizer, policy_delay: int, terms: tuple[LossTerm, ...] = ()):
        self.actor, self.critic, self.optimizer = actor, critic, optimizer
        self.policy_delay, self.terms = int(policy_delay), tuple(terms)

    @property
    def metric_keys(self) -> tuple[str, ...]:
        return (
            "loss/critic",
            "loss/actor",
            *(f"loss/{t.name}" for t in self.terms),
            "q/mean",
            "grad_norm/critic",
            "grad_norm/actor",
        )

    def target(self, target_params, next_obs, batch, key, hp):
        next_action = smoothed_action(
            self.actor.apply, target_params["actor"], next_obs, key, hp.target_noise, hp.target_noise_clip
        )
        return td3_target(batch, self.critic(target_params["critic"], next_obs, next_action), hp.gamma)

    def step(self, carry, batch, key, hp, lr):
        """`carry` = (params, target_params, opt_state, gradient steps so far); `batch` has
        normalised observations and actions in [-1, 1]. The critics learn at every step, the actor
        and both targets on every `policy_delay`-th."""
        params, target_params, opt_state, count = carry
        obs = batch.obs
        target = self.target(target_params, batch.next_obs, batch, key, hp)
        (c_loss, q), grads = jax.value_and_grad(twin_critic_loss, has_aux=True)(
            params["critic"], self.critic, obs, batch.action, target
        )
        critic, opt_critic, critic_norm = self.optimizer.step(params["critic"], grads, opt_state["critic"], lr, hp.max_grad_norm)

        def objective(actor_params):
            action = jnp.tanh(self.actor.apply(actor_params, obs))
            value = self.critic(critic, obs, action)[0]
            return add_terms(-jnp.mean(value), self.terms, ActorTermInputs(obs, batch.action, action, value), hp)

        (a_loss, terms), grads = jax.value_and_grad(objective, has_aux=True)(params["actor"])
        actor, opt_actor, actor_norm = self.optimizer.step(params["actor"], grads, opt_state["actor"], lr, hp.max_grad_norm)
        count = count + 1
        due = count % self.policy_delay == 0  # the delayed part: actor and targets
        keep = lambda new, old: jax.tree.map(lambda a, b: jnp.where(due, a, b), new, old)  # noqa: E731
        params = {"actor": keep(actor, params["actor"]), "critic": critic}
        opt_state = {"actor": keep(opt_actor, opt_state["actor"]), "critic": opt_critic}
        target_params = keep(optax.incremental_update(params, target_params, hp.tau), target_params)
        metrics = {
            "loss/critic": c_loss,
            "loss/actor": a_loss,
            **terms,
            "q/mean": jnp.mean(q),
            "grad_norm/critic": critic_norm,
            "grad_norm/actor": actor_norm,
        }
        return (params, target_params, opt_state, count), metrics
