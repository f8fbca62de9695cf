"""HyperOpt, as a YAML experiment names it (`search: hyperopt`), through a real `Tuner.fit`: the
trials run the values HyperOpt's searcher suggested, not Tune's own random draws."""

import pytest

from ajax_tune.tune.experiment import Experiment, build_searcher
from tests.support.helpers import corridor_config, import_extra

import_extra("hyperopt", extra="hyperopt")

pytestmark = pytest.mark.usefixtures("ray_session")

LR, ENT = (1e-3, 1e-2), (0.0, 0.02)


def test_hyperopt_suggests_the_trials_values(tmp_path):
    trial = corridor_config(
        agent={"lr": {"loguniform": list(LR)}, "ent_coef": {"uniform": list(ENT)}},
        train={"timesteps_per_iteration": 8 * 16, "num_seeds": 1},
    )
    exp = Experiment.from_dict(
        {
            "name": "hyperopt",
            "trial": trial,
            "stop": {"training_iteration": 1},
            # a trial that ends hands its actor (and compiled program) to the next one
            "tune": {"search": {"name": "hyperopt", "seed": 7}, "num_samples": 3, "reuse_actors": True},
        }
    )
    results = exp.tuner(storage_path=str(tmp_path)).fit()
    assert results.num_errors == 0, [r.error for r in results if r.error]
    ran = sorted((r.config["agent"]["lr"], r.config["agent"]["ent_coef"]) for r in results)

    # the same searcher, seeded alike, asked three times outside Tune
    searcher = build_searcher(exp.tune)
    assert type(searcher).__name__ == "HyperOptSearch"
    searcher.set_search_properties(exp.tune.metric, exp.tune.mode, exp.param_space())
    suggested = [searcher.suggest(f"t{i}")["agent"] for i in range(3)]
    assert ran == sorted((s["lr"], s["ent_coef"]) for s in suggested)

    assert len(set(ran)) == 3
    for lr, ent in ran:
        assert LR[0] <= lr <= LR[1] and ENT[0] <= ent <= ENT[1]
    assert all(r.metrics["training_iteration"] == 1 for r in results)
