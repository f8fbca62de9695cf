"""Episodes of a trained policy as a video: rendered by gymnasium's twin of a built-in env, or
by brax's own HTML viewer for a brax env.

For a built-in env the policy runs in the real gymnasium env (CartPole-v1, Pendulum-v1: the
built-in envs' dynamics are parity-tested against them) with `render_mode="rgb_array"`, one frame
after the reset and one after every step; imageio writes them (mp4 through imageio-ffmpeg, gif
without it). Rendering needs pygame. Both are in the `video` extra: `pip install "ajax-tune[video]"`.

For a brax env the policy runs in the env itself, under the checkpoint's task, and brax's viewer
(`brax.io.html`) writes the trajectory as one HTML page, the system the task describes included
(a page that loads brax's viewer script when it is opened).
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import numpy as np

from ajax_tune.errors import ConfigError

FORMATS = (".mp4", ".gif")
BRAX_FORMAT = ".html"


def check_video_path(path, brax: bool = False) -> pathlib.Path:
    """The output path, its format and the packages it needs, checked before anything runs."""
    path = pathlib.Path(path)
    if brax:
        if path.suffix.lower() != BRAX_FORMAT:
            raise ConfigError(f"--video: a brax env's episodes are written by brax's HTML viewer: {path.name} must end in .html")
        if not path.parent.is_dir():
            raise ConfigError(f"--video: no directory {path.parent} to write {path.name} in")
        return path
    if path.suffix.lower() not in FORMATS:
        raise ConfigError(f"--video: {path.name} must end in one of {list(FORMATS)}")
    missing = [
        name for name in ("pygame", "imageio", *(["imageio_ffmpeg"] if path.suffix.lower() == ".mp4" else [])) if not _has(name)
    ]
    if missing:
        raise ConfigError(f'--video needs {", ".join(missing)}: pip install "ajax-tune[video]"')
    if not path.parent.is_dir():
        raise ConfigError(f"--video: no directory {path.parent} to write {path.name} in")
    return path


def record(policy: Callable[[np.ndarray], Any], env_id: str, path, episodes: int = 1, seed: int = 0, fps: int = 30) -> dict:
    """Write `episodes` episodes of `policy` in `gymnasium.make(env_id)` to `path`; returns the
    frame count and each episode's return and length."""
    import gymnasium
    import imageio.v2 as imageio

    from ajax_tune.envs.gymnasium_adapter import _to_gymnasium_action

    env = gymnasium.make(env_id, render_mode="rgb_array")
    frames, returns, lengths = [], [], []
    try:
        for episode in range(episodes):
            _reset(policy)
            obs, _ = env.reset(seed=seed if episode == 0 else None)
            frames.append(env.render())
            ret, length, done = 0.0, 0, False
            while not done:
                obs, reward, terminated, truncated, _ = env.step(_to_gymnasium_action(env.action_space, policy(obs)))
                frames.append(env.render())
                ret, length, done = ret + float(reward), length + 1, terminated or truncated
            returns.append(ret)
            lengths.append(length)
    finally:
        env.close()
    path = pathlib.Path(path)
    if path.suffix.lower() == ".mp4":
        # macro_block_size 1: frames of any size, unpadded (gymnasium's are 600x400 and 500x500)
        imageio.mimwrite(path, frames, fps=fps, macro_block_size=1)
    else:
        imageio.mimwrite(path, frames, duration=1000 / fps)
    return {"video": str(path), "frames": len(frames), "returns": returns, "lengths": lengths}


def record_brax(
    policy: Callable[[np.ndarray], Any], env, path, task: dict | None = None, episodes: int = 1, seed: int = 0
) -> dict:
    """Write `episodes` episodes of `policy` in `env` (a `BraxEnv`, or wrappers around one) under `task` to `path` as
    brax's HTML viewer page; an episode ends where the env terminates it or at its time limit.
    Returns the frame count and each episode's return and length."""
    import jax
    from brax.io import html

    task = env.validate_task(task or {})
    limit = env.max_episode_steps  # an episode wrapper's time limit, where one is given
    while not hasattr(type(env), "system"):
        env = env.env  # the brax env inside its wrappers, stepped as it is
    reset, step = jax.jit(env.reset), jax.jit(env.step)
    key = jax.random.PRNGKey(seed)
    frames, returns, lengths = [], [], []
    for _ in range(episodes):
        _reset(policy)
        key, k = jax.random.split(key)
        state = reset(k, task)
        frames.append(state.physics.pipeline_state)
        ret, length = 0.0, 0
        while True:
            key, k = jax.random.split(key)
            state = step(state, np.asarray(policy(np.asarray(state.obs)), np.float32), k)
            frames.append(state.physics.pipeline_state)
            ret, length = ret + float(state.reward), length + 1
            if bool(state.terminated) or length >= limit:
                break
        returns.append(ret)
        lengths.append(length)
    path = pathlib.Path(path)
    path.write_text(html.render(env.system(task), jax.device_get(frames)))
    return {"video": str(path), "frames": len(frames), "returns": returns, "lengths": lengths}


def _reset(policy) -> None:
    """A stateful policy (a recurrent agent's) starts each episode afresh."""
    reset = getattr(policy, "reset", None)
    if callable(reset):
        reset()


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None
