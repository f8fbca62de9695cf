"""The `ajax-tune` command line: one module per command.

parser.py    the parser, dispatch and one-line errors
run.py       run and resume: an experiment checked, a Ray started or joined, Tune's fit, a report
launch.py    what run and resume check and hold first: storage, the experiment lock, resources, Ray
report.py    what a finished run prints
evaluate.py  a checkpoint's policy in its JAX env or in gymnasium, with a video
collect.py   a dataset of transitions from a checkpoint's policy
plot.py      PNG plots of an experiment
progress.py  a progress line for commands that take a while
reaper.py    clears up the Ray processes of a killed driver
"""

from ajax_tune.cli.parser import entry, main

__all__ = ["entry", "main"]
