"""Weights & Biases logging for Tune experiments, with env steps as the x-axis.

Ray's `WandbLoggerCallback` logs each result at `step=training_iteration`. Under PBT Tune rewinds
`training_iteration` after an exploit, and W&B drops every row whose step is below the latest
one and merges a row at the latest step into it: rows after an exploit vanish or overwrite
earlier ones, without an error. Here the logging actor lets W&B count rows
itself and declares `env_steps` the step metric of every chart: no row is dropped, and curves
are drawn against the experience the lineage has actually consumed.

Runs are offline unless an API key is available: a cluster without network access (or a test)
still records everything, to be uploaded later with `wandb sync <run dir>`.
"""

from __future__ import annotations

import logging
import os
import pathlib
from collections.abc import Mapping
from typing import Any

import pyarrow.fs
from ray.air.integrations.wandb import (
    WANDB_ENV_VAR,
    WANDB_GROUP_ENV_VAR,
    WANDB_MODE_ENV_VAR,
    WandbLoggerCallback,
)

from ajax_tune import compat

logger = logging.getLogger(__name__)

STEP_METRIC = "env_steps"
_ACTOR_ENV = "_ajax_tune_actor_env"  # travels with the wandb.init kwargs, taken out by the actor


class _EnvStepWandb:
    """The `wandb` module as the logging actor sees it: runs get `env_steps` as their step
    metric, and `log` ignores the `step` Ray passes (its rewinds would drop rows)."""

    def __init__(self, wandb_module):
        self._wandb = wandb_module

    def __getattr__(self, name: str):
        return getattr(self._wandb, name)

    def init(self, *args, **kwargs):
        run = self._wandb.init(*args, **kwargs)
        run.define_metric(STEP_METRIC)
        run.define_metric("*", step_metric=STEP_METRIC)
        return run

    def log(self, data: Mapping[str, Any], step: int | None = None, **kwargs) -> None:
        self._wandb.log(data, **kwargs)


class _EnvStepLoggingActor(compat.wandb_logging_actor()):
    def __init__(self, *args, **kwargs):
        # The actor runs in a Ray worker started before the caller set WANDB_* variables
        # (WANDB_SILENT, WANDB_CACHE_DIR, ...): apply the driver's values here.
        os.environ.update(kwargs.pop(_ACTOR_ENV, {}))
        super().__init__(*args, **kwargs)
        compat.set_wandb_actor_module(self, _EnvStepWandb(compat.wandb_actor_module(self)))


class EnvStepWandbCallback(WandbLoggerCallback):
    """`WandbLoggerCallback` logging against env steps, offline by default, config included.

    `mode` defaults to WANDB_MODE, else "online" if WANDB_API_KEY is set, else "offline".
    `dir` (or WANDB_DIR) is where runs are written; by default each trial's own directory.
    `log_config` defaults to True: results carry the trial's current config, so PBT's
    mutations reach the run's config and appear as `config/...` charts.
    Other keyword arguments go to `WandbLoggerCallback` (e.g. `excludes`) or `wandb.init`.

    `run_dirs` maps each started trial's id to the folder its W&B run is written in
    (`offline-run-<time>-<trial id>` under it when offline).
    """

    def __init__(self, project: str = "ajax-tune", group: str | None = None, mode: str | None = None, **kwargs):
        explicit = mode or os.environ.get(WANDB_MODE_ENV_VAR)
        self.mode = explicit or ("online" if os.environ.get(WANDB_ENV_VAR) else "offline")
        directory = kwargs.pop("dir", None) or os.environ.get("WANDB_DIR")
        if directory:  # absolute: the logging actor runs in another working directory
            kwargs["dir"] = str(pathlib.Path(directory).expanduser().resolve())
        kwargs.setdefault("log_config", True)
        kwargs.setdefault("reinit", reinit_value())
        super().__init__(project=project, group=group, mode=self.mode, **kwargs)
        self.run_dirs: dict[str, pathlib.Path] = {}
        if self.mode == "offline":
            where = f"{kwargs['dir']}/wandb" if directory else "each trial's directory, under wandb/"
            (logger.info if explicit else logger.warning)(
                "W&B runs offline%s: written to %s; upload them with `wandb sync`",
                "" if explicit else f" ({WANDB_ENV_VAR} is not set)",
                where,
            )

    def setup(self, *args, **kwargs) -> None:
        if self.mode == "online":
            super().setup(*args, **kwargs)  # checks for an API key
        elif not self.group:
            self.group = os.environ.get(WANDB_GROUP_ENV_VAR)

    def _start_actor(self, trial, exclude_results, **init_kwargs) -> None:
        """What Ray calls to start a trial's logging actor (`compat.use_wandb_actor` installs it under
        Ray's name): a restarted trial keeps its run, and the actor gets the trial's own directory,
        our curriculum callbacks in its config and the driver's WANDB_* variables."""
        if compat.wandb_callback_has_actor(self, trial):
            return  # a restarted trial keeps its actor (and run)
        config = init_kwargs.get("config", {})
        if "callbacks" in trial.config and "callbacks" not in self.excludes:
            # Ray drops a "callbacks" key (RLlib's callback class); ours are curriculum specs
            init_kwargs["config"] = {**config, "callbacks": compat.wandb_clean_config(trial.config["callbacks"])}
        if not init_kwargs.get("dir"):
            init_kwargs["dir"] = _trial_dir(trial)
        os.makedirs(init_kwargs["dir"], exist_ok=True)
        self.run_dirs[trial.trial_id] = pathlib.Path(init_kwargs["dir"]) / "wandb"
        logger.info("W&B run of trial %s: %s", trial.trial_id, self.run_dirs[trial.trial_id])
        init_kwargs[_ACTOR_ENV] = {k: v for k, v in os.environ.items() if k.startswith("WANDB_") and k != WANDB_ENV_VAR}
        compat.start_wandb_actor(super(), trial, exclude_results, **init_kwargs)


compat.use_wandb_actor(EnvStepWandbCallback, _EnvStepLoggingActor, EnvStepWandbCallback._start_actor)


def wandb_callback(
    project: str = "ajax-tune", group: str | None = None, mode: str | None = None, **wandb_init_kwargs
) -> EnvStepWandbCallback:
    """A Tune callback logging every trial to W&B against env steps, with its (mutated) config;
    offline unless an API key is available. See `EnvStepWandbCallback` for the arguments."""
    return EnvStepWandbCallback(project=project, group=group, mode=mode, **wandb_init_kwargs)


def reinit_value() -> str | bool:
    """`wandb.init(reinit=...)` for "finish the previous run, start a new one". Ray passes True,
    which wandb (0.19.10 on) still takes but warns about once per trial; an older wandb takes
    only the boolean."""
    import wandb

    try:
        wandb.Settings(reinit="finish_previous")
    except Exception:  # pydantic's ValidationError, or a wandb before the named modes
        return True
    return "finish_previous"


def _trial_dir(trial) -> str:
    """The trial's results folder when it is on this machine, else Ray's staging copy of it."""
    if isinstance(trial.storage.storage_filesystem, pyarrow.fs.LocalFileSystem):
        return trial.path
    return trial.local_path


def log_best_trial_video(callback: EnvStepWandbCallback, experiment_path, checkpoint_path, episodes: int = 1) -> str:
    """At the end of a run with W&B on: a short video of the best trial's policy (from
    `checkpoint_path`, its best member), written to `experiment_path/best_trial.mp4` and logged to
    a W&B run of its own in the trials' project and group (`video/best_trial`, with its return).
    Returns the line to print: where the video went, or why there is none (an env without a
    gymnasium twin, the `video` extra missing); nothing here fails the run that finished."""
    import numpy as np
    import wandb

    from ajax_tune.checkpoint import read_metadata
    from ajax_tune.errors import ConfigError
    from ajax_tune.twins import GYMNASIUM_TWINS
    from ajax_tune.video import check_video_path, record

    env_name = ((read_metadata(checkpoint_path).get("extra") or {}).get("config") or {}).get("env", {}).get("name")
    twin = GYMNASIUM_TWINS.get(env_name)
    if twin is None:
        return f"W&B video: none (videos render {sorted(GYMNASIUM_TWINS)}; the best trial's env is {env_name!r})"
    path = pathlib.Path(experiment_path) / "best_trial.mp4"
    try:
        check_video_path(path)
    except ConfigError as exc:
        return f"W&B video: none ({str(exc).removeprefix('--video ').removeprefix('--video: ')})"
    from ajax_tune.runner import Runner

    runner = Runner.from_checkpoint(checkpoint_path)
    video = record(runner.policy(), twin, path, episodes=episodes)
    init = {k: v for k, v in callback.kwargs.items() if k in ("dir", "entity", "tags", "notes")}
    run = wandb.init(
        project=callback.project,
        group=callback.group,
        mode=callback.mode,
        name=f"{pathlib.Path(experiment_path).name}-best-trial",
        job_type="best_trial_video",
        config={"checkpoint": str(checkpoint_path), "env": twin},
        reinit=reinit_value(),
        **init,
    )
    try:
        run.log({"video/best_trial": wandb.Video(str(path), format="mp4"), "video/return_mean": float(np.mean(video["returns"]))})
    finally:
        run.finish()
    return f"W&B video: {path} ({video['frames']} frames, return {np.mean(video['returns']):.1f}), logged to run {run.name}"
