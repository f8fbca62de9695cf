"""Populations: members of one trial that share every static setting, trained as lanes of one
compiled program.

    spec.py     the `population` section: members, draws from a space, selection, PBT's settings
    results.py  a call's output split by member and reduced into the trial's result
    pbt.py      PBT inside a trial: exploit as a gather of lanes, explore as new traced settings
"""
