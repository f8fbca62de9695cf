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

    _logger_actor_cls = _EnvStepLoggingActor  # compat.WANDB_ACTOR_CLASS_ATTR

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

    def _start_logging_actor(self, trial, exclude_results, **init_kwargs) -> None:  # compat.WANDB_START_ACTOR_METHOD
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
        super()._start_logging_actor(trial, exclude_results, **init_kwargs)


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
