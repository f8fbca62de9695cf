"""What `ajax-tune run` and `resume` print when Tune's fit returns: the best trial, its best and
last results, its best member's settings, its checkpoints, the plots and where results are."""

from __future__ import annotations

import pathlib
import sys

from ajax_tune.cli.parser import fmt, isnan
from ajax_tune.results.best import best_checkpoint, best_member, best_result, best_row

SUMMARY_KEYS = (
    "eval/return_mean",
    "eval/return_std",
    "eval/success_rate_mean",
    "eval/length_mean",
    "env_steps",
    "training_iteration",
    "lr",
    "curriculum/level",
)


def report(results, metric, mode, plots: bool) -> int:
    print()
    errors = [r for r in results if r.error]
    best, metric, mode, why_none = best_result(results, metric, mode)
    if why_none is not None:
        print(f"No best trial: {why_none}")
    if best is not None:
        print(f"Best trial: {pathlib.Path(best.path).name} (the best {metric} of any trial at any iteration)")
        peak = best_row(best.metrics_dataframe, metric, mode)
        if peak is not None:
            print(f"  best {metric:19s} {fmt(peak[metric])} at training_iteration {int(peak['training_iteration'])}")
        print("  at its last iteration:")
        for key in SUMMARY_KEYS:
            if key in best.metrics and not isnan(best.metrics[key]):
                print(f"  {key:24s} {fmt(best.metrics[key])}")
        for line in best_member_lines(best.config, peak.to_dict() if peak is not None else best.metrics):
            print(line)
        kept = best_checkpoint(best, metric, mode)
        print(f"  checkpoint               {kept[0].path if kept else '(none)'}")
        if kept:
            score = kept[1].get(metric)
            print(
                f"  (the best kept by {metric}: {fmt(score)} at training_iteration "
                f"{kept[1].get('training_iteration')}; evaluate it with `ajax-tune evaluate`)"
            )
            if peak is not None and score != peak[metric]:
                print("  (the best result was not checkpointed; checkpoint.frequency: 1 keeps a checkpoint of every iteration)")
        if best.checkpoint is not None and (not kept or best.checkpoint.path != kept[0].path):
            print(f"  latest checkpoint        {best.checkpoint.path}")
    if plots:
        from ajax_tune.plotting import plot_experiment

        try:
            paths = plot_experiment(results.experiment_path, metric=metric)
            if paths:
                print(f"Plots: {pathlib.Path(paths[0]).parent}")
        except ValueError as exc:
            print(f"No plots: {exc}")
    print(f"Results: {results.experiment_path}")
    if errors:
        print(
            f"{len(errors)} trial(s) errored; continue them with `ajax-tune resume {results.experiment_path} --resume-errored`",
            file=sys.stderr,
        )
        return 1
    return 0


def best_member_lines(config: dict | None, row: dict) -> list[str]:
    """For a population trial, its best member at `row` and that member's settings (`best_member`)."""
    found = best_member(config, row)
    if found is None:
        return []
    k, size, settings = found
    shown = " ".join(f"{key}={fmt(value)}" for key, value in settings.items()) or "(the trial's config)"
    return [
        f"  best member              {k} of {size} (population/best_member; `ajax-tune evaluate CKPT --member {k}`)",
        f"  its config               {shown}",
    ]


def best_trial_video(results, metric, mode, callback) -> None:
    """With W&B on, a short video of the best trial's best kept checkpoint, logged to W&B
    (`wandb_logging.log_best_trial_video`); a failure here is a warning, not the run's."""
    best, metric, mode, _ = best_result(results, metric, mode)
    if best is None:
        return
    kept = best_checkpoint(best, metric, mode)
    if not kept:
        print("W&B video: none (the best trial kept no checkpoint)")
        return
    from ajax_tune.tune.wandb_logging import log_best_trial_video

    try:
        print(log_best_trial_video(callback, results.experiment_path, kept[0].path))
    except Exception as exc:  # the run itself finished: say what went wrong, keep its exit code
        print(f"W&B video: failed ({type(exc).__name__}: {exc})", file=sys.stderr)
