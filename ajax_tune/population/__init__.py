"""Populations: members of one trial that share every static setting, trained as lanes of one
compiled program.

    spec.py     the `population` section: its members, how they are ranked, PBT's and halving's settings
    draws.py    members drawn from a search space, independently or stratified
    results.py  a call's output split by member and reduced into the trial's result
    pbt.py      PBT inside a trial: exploit as a gather of lanes, explore as new traced settings
    prune.py    successive halving inside a trial: the survivors' lanes taken out of the state
"""
