"""Resuming after a killed driver: each trial continues from its newest complete checkpoint.

Tune snapshots its experiment state (`experiment_state-*.json`) every few seconds, so when the
driver is killed the snapshot may know only an older checkpoint of a trial, or none, although
newer ones are on disk: `Tuner.restore` would then repeat work, or start the trial again, and
write its next checkpoints over the newer ones. Before restoring, `point_trials_at_newest`
rewrites the newest snapshot so that every unfinished trial's checkpoints are those on disk:
each complete checkpoint newer than the snapshot's is registered in order (with the result
saved in its metadata, so Tune's counters continue from it), incomplete ones are skipped with a
note, and the trial's checkpoint index moves past everything on disk.

This leans on Tune's trial and checkpoint-manager classes (Ray 2.x), their private parts through
`ajax_tune.compat`; it is the Tune layer's business, and nothing below it imports Ray.
"""

from __future__ import annotations

import os
import pathlib
import pickle

from ajax_tune import compat
from ajax_tune.checkpoint import incomplete_reason, newest_complete, read_metadata, sorted_checkpoints
from ajax_tune.errors import CheckpointError, LaunchError

TUNER_FILE = "tuner.pkl"
TRAINABLE = "AjaxTrainable"


def check_experiment(directory: pathlib.Path) -> None:
    """Refuse, before Ray starts, an experiment directory that Tune could not resume."""
    path = directory / TUNER_FILE
    if not path.exists():
        raise LaunchError(f"{directory} is not a Tune experiment directory (no {TUNER_FILE})")
    advice = (
        "so the experiment cannot be resumed; run it again with `ajax-tune run` (trial directories and "
        "checkpoints stay where they are)"
    )
    try:
        import ray.tune  # noqa: F401  (the classes a Tuner's state refers to)

        state = pickle.loads(path.read_bytes())
    except Exception as exc:
        raise LaunchError(f"{path} cannot be read ({type(exc).__name__}), {advice}") from None
    if not isinstance(state, dict) or "__trainable_name" not in state:
        raise LaunchError(f"{path} holds a {type(state).__name__}, not a Tuner's state, {advice}")
    if state["__trainable_name"] != TRAINABLE:
        raise LaunchError(f"{directory} is an experiment of trainable {state['__trainable_name']!r}, not ajax_tune's {TRAINABLE}")
    if not any(directory.glob("experiment_state-*.json")):
        raise LaunchError(
            f"{directory} holds no experiment state (experiment_state-*.json): the run ended before Tune saved one; {advice}"
        )


def point_trials_at_newest(directory: pathlib.Path) -> list[str]:
    """Rewrite the newest experiment snapshot so each unfinished trial resumes from its newest
    complete checkpoint on disk. Returns notes for the user (one line each)."""
    from ray.train import Checkpoint

    state_path = pathlib.Path(compat.newest_experiment_state(str(directory)))
    try:
        state = compat.load_experiment_state(state_path.read_text())
        trials = compat.experiment_trials(state)
    except compat.CompatError:
        raise
    except Exception as exc:
        raise LaunchError(
            f"{state_path} cannot be read ({type(exc).__name__}); the experiment cannot be resumed as it was saved"
        ) from None

    notes, changed = [], False
    for trial in trials:
        if compat.trial_finished(trial):
            continue
        on_disk = sorted_checkpoints(directory / trial.storage.trial_dir_name)
        newest, skipped = newest_complete(on_disk)
        for path, reason in skipped:
            notes.append(f"note: {trial.trial_id}: skipping {path.name}, incomplete ({reason})")
        manager = trial.run_metadata.checkpoint_manager
        registered = {pathlib.Path(r.checkpoint.path).name: r for r in compat.checkpoint_results(manager)}
        latest = manager.latest_checkpoint_result
        latest_name = pathlib.Path(latest.checkpoint.path).name if latest is not None else None
        if newest is None and latest is not None and incomplete_reason(latest.checkpoint.path) is not None:
            compat.set_checkpoint_results(manager, [])
            compat.set_latest_checkpoint_result(manager, None)
            trial.run_metadata.last_result = {}
            trial.invalidate_json_state()
            changed = True
            notes.append(f"note: {trial.trial_id}: no complete checkpoint on disk; the trial starts again")
            continue
        if newest is None or newest.name == latest_name:
            continue
        # Forget what is no longer whole on disk, then register what Tune had not heard of, in order.
        compat.set_checkpoint_results(
            manager, [r for r in compat.checkpoint_results(manager) if incomplete_reason(r.checkpoint.path) is None]
        )
        filesystem = latest.checkpoint.filesystem if latest is not None else None
        for path in on_disk:
            if path.name in registered or path.name > newest.name or incomplete_reason(path) is not None:
                continue
            manager.register_checkpoint(compat.training_result(Checkpoint(str(path), filesystem=filesystem), _saved_result(path)))
        if newest.name in registered:  # the snapshot's latest was incomplete: fall back to an earlier one
            compat.set_latest_checkpoint_result(manager, registered[newest.name])
        trial.run_metadata.last_result = dict(manager.latest_checkpoint_result.metrics)
        trial.storage.current_checkpoint_index = max(int(p.name.rsplit("_", 1)[-1]) for p in on_disk)
        trial.invalidate_json_state()
        trial.run_metadata.invalidate_cache()
        changed = True
        notes.append(
            f"note: {trial.trial_id}: resuming from {newest.name} (training_iteration "
            f"{trial.run_metadata.last_result.get('training_iteration', '?')}); Tune's last snapshot "
            f"knew {latest_name or 'no checkpoint'}"
        )
    if changed:
        scratch = state_path.with_name(f".{state_path.name}.tmp")
        scratch.write_text(compat.encode_experiment_state(state, trials))
        os.replace(scratch, state_path)
    return notes


def _saved_result(path: pathlib.Path) -> dict:
    """The result Tune had when it saved this checkpoint (kept in our metadata), or what the
    checkpoint itself knows when it predates that."""
    try:
        extra = read_metadata(path).get("extra", {})
    except CheckpointError:
        return {}
    result = dict(extra.get("result") or {})
    result.setdefault("training_iteration", int(extra.get("iteration", 0)))
    return result
