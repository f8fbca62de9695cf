"""`ajax-tune plot`: PNG plots of an experiment directory."""

from __future__ import annotations

import pathlib

from ajax_tune.cli.parser import UsageError


def cmd_plot(args) -> int:
    from ajax_tune.plotting import plot_experiment

    directory = pathlib.Path(args.directory)
    if not directory.is_dir():
        raise UsageError(f"no experiment directory at {directory}")
    try:
        paths = plot_experiment(directory, args.out, metric=args.metric)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    for path in paths:
        print(path)
    return 0
