"""Episodes of a trained policy as a video, rendered by gymnasium's twin of a built-in env.

The policy runs in the real gymnasium env (CartPole-v1, Pendulum-v1: the built-in envs'
dynamics are parity-tested against them) with `render_mode="rgb_array"`, one frame after the
reset and one after every step; imageio writes them (mp4 through imageio-ffmpeg, gif without
it). Rendering needs pygame. Both are in the `video` extra: `pip install "ajax-tune[video]"`.
"""

from __future__ import annotations

import pathlib
from collections.abc import Callable
from typing import Any

import numpy as np

from ajax_tune.errors import ConfigError

FORMATS = (".mp4", ".gif")


def check_video_path(path) -> pathlib.Path:
    """The output path, its format and the packages it needs, checked before anything runs."""
    path = pathlib.Path(path)
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


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None
