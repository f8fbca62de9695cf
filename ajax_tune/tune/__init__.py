"""The Ray Tune layer: everything here may import Ray; nothing below it does.

trainable.py      AjaxTrainable: Tune's class API over a Runner, a thin shell
experiment.py     YAML experiments (and their dicts) to Tuners, checked before Ray starts
choices.py        searchers and schedulers by name, their options checked
searchers.py      PopulationSearcher: a Tune searcher's suggestions packed into population trials
recovery.py       resuming after a killed driver from the newest complete checkpoints
wandb_logging.py  W&B with env steps as the x-axis
output.py         trial names, the box Tune prints at a trial's end
"""
