"""`AjaxTrainable`: Ray Tune's class API over a `Runner`.

The lifecycle is Tune's: `setup` validates the config, prepares JAX for the trial's resources
and builds the runner (compiling once); `step` is one `Runner.train`; checkpoints are the
runner's; `reset_config` lets `reuse_actors=True` start a new trial, or continue a PBT trial
under mutated hyperparameters, without recompiling unless a static setting changed.
"""

from __future__ import annotations

import logging
from typing import Any

from ray import tune
from ray.tune import PlacementGroupFactory

from ajax_tune import compat
from ajax_tune.checkpoint import find_complete, read_metadata
from ajax_tune.config import Config
from ajax_tune.jax_setup import configure_jax
from ajax_tune.results import record as trial_record
from ajax_tune.tune.output import ResultBox, trial_dirname, trial_names

logger = logging.getLogger(__name__)


class AjaxTrainable(tune.Trainable):
    def setup(self, config: dict[str, Any]) -> None:
        parsed = Config.from_dict(config)  # clear errors before JAX does anything
        self.jax_settings = configure_jax(parsed.resources.cpu, parsed.resources.gpu)
        from ajax_tune.runner import Runner

        self.runner = Runner(parsed, trial_id=self.trial_id, trial_name=self.trial_name)

    def step(self) -> dict[str, Any]:
        result = self.runner.train()
        if directory := compat.trial_storage_dir(self):
            row = {**result, "training_iteration": self.iteration + 1, "trial_id": self.trial_id}
            trial_record.append(directory, self.runner.iteration, row)
        return result

    def save_checkpoint(self, checkpoint_dir: str) -> None:
        compat.skip_used_checkpoint_dirs(self)  # never over a checkpoint PBT may have handed on
        self.runner.save(checkpoint_dir, result=self.get_state()["last_result"])

    def load_checkpoint(self, checkpoint: str) -> None:
        chosen, note = find_complete(checkpoint)
        if note:  # a damaged checkpoint gives way to the newest whole one before it
            logger.warning("%s: %s", self.trial_id, note)
        saved = read_metadata(chosen).get("extra", {}).get("result", {})
        # Tune's counters follow the state loaded: those of the call the checkpoint was saved after.
        # They differ from what Tune restored after a damaged checkpoint, and when synchronous PBT
        # hands an exploiting trial a donor checkpoint that the donor's next save overwrote (which
        # save_checkpoint now prevents, through compat.skip_used_checkpoint_dirs).
        restored = self.iteration
        if note is None and restored and saved.get("training_iteration", restored) != restored:
            logger.warning(
                "%s: %s was saved after iteration %s, not %s as Tune restored; continuing from %s",
                self.trial_id,
                chosen,
                saved["training_iteration"],
                restored,
                saved["training_iteration"],
            )
        compat.set_trainable_progress(self, saved)
        self.runner.restore(chosen)
        if directory := compat.trial_storage_dir(self):
            trial_record.rewind(directory, self.runner.iteration)

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        self.runner.trial_id, self.runner.trial_name = self.trial_id, self.trial_name
        self.runner.reconfigure(new_config)
        return True

    @classmethod
    def default_resource_request(cls, config: dict[str, Any]) -> PlacementGroupFactory:
        resources = Config.from_dict(config).resources
        bundle = {"CPU": resources.cpu}
        if resources.gpu:
            bundle["GPU"] = resources.gpu
        return PlacementGroupFactory([bundle])


compat.set_tune_result_keys(AjaxTrainable, ResultBox())  # the keys of the box Tune prints at a trial's end


__all__ = ["AjaxTrainable", "trial_dirname", "trial_names"]
