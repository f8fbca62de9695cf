"""The built-in envs that are gymnasium's own under the default task (parity-tested), by
gymnasium's ids: where `evaluate --gymnasium` and `--video` run a policy, and how a Minari
dataset's env (named by its gymnasium id) is matched to a trial's."""

GYMNASIUM_TWINS = {"cartpole": "CartPole-v1", "pendulum": "Pendulum-v1"}
