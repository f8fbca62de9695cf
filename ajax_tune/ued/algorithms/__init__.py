"""The built-in level algorithms, each an implementation of `ajax_tune.ued.algorithm.LevelAlgorithm`.

dr.py     domain randomisation: fresh levels every rollout
plr.py    prioritised level replay and robust PLR (Jiang et al. 2021), on a level buffer
accel.py  ACCEL (Parker-Holder et al. 2022): robust PLR whose replays are followed by edits
sfl.py    Sampling For Learnability (Rutherford et al. 2024): the levels of highest p (1 - p)
"""
