"""Every private API ajax_tune uses still exists in the installed jax, ray and brax, and does what
we rely on. When one of these fails after an upgrade, fix `ajax_tune/compat/`."""

import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax_tune import compat
from tests.support.helpers import import_extra


def test_jit_cache_size_counts_compiled_programs():
    f = jax.jit(lambda x: x * 2)
    assert compat.jit_cache_size(f) == 0
    f(jnp.ones(3))
    f(jnp.zeros(3))
    assert compat.jit_cache_size(f) == 1
    f(jnp.ones(4))  # another shape: another program
    assert compat.jit_cache_size(f) == 2
    with pytest.raises(compat.CompatError, match=r"_cache_size\(\) is not available in jax \d"):
        compat.jit_cache_size(lambda x: x)


def test_unregister_event_duration_listener():
    heard = []
    listener = lambda event, seconds, **_: heard.append(event)
    jax.monitoring.register_event_duration_secs_listener(listener)
    jax.monitoring.record_event_duration_secs("/ajax_tune/test/one", 0.1)
    compat.unregister_event_duration_listener(listener)
    jax.monitoring.record_event_duration_secs("/ajax_tune/test/two", 0.1)
    assert heard == ["/ajax_tune/test/one"]


def test_backends_are_initialized():
    jnp.ones(1).block_until_ready()  # this session has started them
    assert compat.backends_are_initialized() is True


def test_jaxued_maze_prefabs_are_read_without_importing_its_env_package(monkeypatch):
    import sys

    from tests.support.helpers import import_extra

    import_extra("jaxued", extra="ued")
    from jaxued.environments.maze.level import prefabs

    for name in [m for m in sys.modules if m.startswith("jaxued.environments")]:
        monkeypatch.delitem(sys.modules, name)  # as in a driver that never imported it
    assert compat.jaxued_maze_prefabs() == prefabs
    assert "jaxued.environments.maze.level" not in sys.modules


def test_jaxued_minimax_mutator_runs_without_changing_jax():
    from tests.support.helpers import import_extra

    import_extra("jaxued", extra="ued")
    from jaxued.environments.maze import Level

    had_tree_map = hasattr(jax, "tree_map")
    level = Level(
        wall_map=jnp.zeros((5, 5), bool),
        goal_pos=jnp.array([4, 4], jnp.uint32),
        agent_pos=jnp.array([0, 0], jnp.uint32),
        agent_dir=jnp.array(0, jnp.uint8),
        width=jnp.int32(5),
        height=jnp.int32(5),
    )
    child = jax.jit(compat.jaxued_minimax_mutator(10))(jax.random.PRNGKey(0), level, 10)
    assert child.wall_map.shape == (5, 5) and child.goal_pos.dtype == jnp.uint32
    assert bool(child.wall_map.any()) or not np.array_equal(child.goal_pos, level.goal_pos)
    assert hasattr(jax, "tree_map") == had_tree_map  # nothing process-wide changed


def test_brax_env_names():
    names = compat.brax_env_names()
    assert "inverted_pendulum" in names and "ant" in names


@pytest.mark.heavy  # importing Playground takes seconds, as for the suites' configs (tests/test_configs.py)
def test_playground_env_with_model():
    """Needs the playground extra, which dev cannot hold (docs/testing.md): run where it is
    installed, as CI's whole suite requires; the fast tier on the lowest set leaves it out."""
    import_extra("mujoco_playground", extra="playground", in_dev=False)
    from mujoco_playground import registry

    env = registry.load("CartpoleBalance", config_overrides={"impl": "jax"})
    heavier = env.mjx_model.tree_replace({"body_mass": env.mjx_model.body_mass * 2})
    copied = compat.playground_env_with_model(env, heavier)
    assert copied.mjx_model is heavier and env.mjx_model is not heavier  # the original is untouched
    assert type(copied) is type(env) and copied.action_size == env.action_size


def test_wandb_logging_internals(tmp_path, monkeypatch):
    from ray.air.integrations.wandb import WandbLoggerCallback

    monkeypatch.chdir(tmp_path)  # the actor changes directory to its logdir; this restores it

    actor_cls = compat.wandb_logging_actor()
    assert callable(getattr(actor_cls, "run", None))
    # the actor keeps the wandb module it logs through in `_wandb`, set in __init__
    actor = actor_cls(logdir=str(tmp_path), queue=None, exclude=[], to_config=[])
    assert compat.wandb_actor_module(actor).__name__ == "wandb"
    compat.set_wandb_actor_module(actor, "replacement")
    assert compat.wandb_actor_module(actor) == "replacement"
    with pytest.raises(compat.CompatError, match="_wandb"):
        compat.wandb_actor_module(object())

    # the callback names its actor class and starts actors through the overridable method
    assert getattr(WandbLoggerCallback, compat.WANDB_ACTOR_CLASS_ATTR) is actor_cls
    start = inspect.signature(getattr(WandbLoggerCallback, compat.WANDB_START_ACTOR_METHOD))
    assert list(start.parameters)[:3] == ["self", "trial", "exclude_results"]
    assert any(p.kind is p.VAR_KEYWORD for p in start.parameters.values())
    callback = WandbLoggerCallback(project="p", mode="offline")
    assert compat.wandb_callback_has_actor(callback, "trial") is False

    # a subclass starts its own actor class through its own start, which can hand on to Ray's
    started = []

    class Own(WandbLoggerCallback):
        def _start(self, trial, exclude_results, **init_kwargs):
            started.append(("own", trial))
            compat.start_wandb_actor(super(), trial, exclude_results, **init_kwargs)

    class OwnActor(actor_cls):
        pass

    compat.use_wandb_actor(Own, OwnActor, Own._start)
    assert getattr(Own, compat.WANDB_ACTOR_CLASS_ATTR) is OwnActor
    assert getattr(WandbLoggerCallback, compat.WANDB_ACTOR_CLASS_ATTR) is actor_cls  # the base is untouched
    monkeypatch.setattr(
        WandbLoggerCallback, compat.WANDB_START_ACTOR_METHOD, lambda self, trial, *a, **k: started.append(("ray", trial))
    )
    Own(project="p", mode="offline")._start_logging_actor("trial", [])
    assert started == [("own", "trial"), ("ray", "trial")]
    with pytest.raises(compat.CompatError, match="_logger_actor_cls"):
        compat.use_wandb_actor(object, OwnActor, Own._start)

    assert compat.wandb_clean_config({"a": 1, "f": print})["a"] == 1
    assert {compat.wandb_queue_item(k).name for k in ("RESULT", "CHECKPOINT", "END")} == {"RESULT", "CHECKPOINT", "END"}


def test_tune_choices_name_every_option():
    """tune_choices.py refuses options the class does not take, reading the class's signature; that
    is exact only while no class in the table takes **kwargs."""
    from ajax_tune.imports import resolve_import
    from ajax_tune.tune.choices import CHOICES

    for kind, choices in CHOICES.items():
        for name, choice in choices.items():
            if choice.target is None or (choice.requires and not _importable(choice.requires)):
                continue
            cls = resolve_import(choice.target, f"{kind} {name}")
            params = inspect.signature(cls).parameters
            assert not any(p.kind is p.VAR_KEYWORD for p in params.values()), (kind, name)
            for keyword in (
                choice.seed,
                choice.concurrency,
                *choice.defaults,
                *choice.required,
                *choice.spaces,
                *choice.metrics,
                *choice.config_keys,
            ):
                assert not keyword or keyword in params, (kind, name, keyword)


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


# -- ray: what resuming, the trainable, the launcher and the report rely on ------------------------


def test_experiment_state_snapshots(tmp_path):
    """The newest snapshot is found, and what Tune's encoder wrote reads back, functions included."""
    import json
    import pathlib

    from ray.tune.utils.serialization import TuneFunctionEncoder

    for stamp in ("2000-01-01_00-00-00", "2001-01-01_00-00-00"):
        state = {"trial_data": [], "stamp": stamp, "fn": print}
        (tmp_path / f"experiment_state-{stamp}.json").write_text(json.dumps(state, cls=TuneFunctionEncoder))
    newest = compat.newest_experiment_state(str(tmp_path))
    assert newest.endswith("experiment_state-2001-01-01_00-00-00.json")
    loaded = compat.load_experiment_state(pathlib.Path(newest).read_text())
    assert loaded["stamp"] == "2001-01-01_00-00-00" and loaded["fn"] is print


def test_experiment_trials_round_trip():
    """A snapshot's trials come back as Trials, not stubs, and their status reads as finished or not."""
    from ray.tune import PlacementGroupFactory
    from ray.tune.experiment.trial import Trial

    trial = Trial("AjaxTrainable", stub=True, config={"a": 1}, placement_group_factory=PlacementGroupFactory([{"CPU": 1}]))
    trial.create_placement_group_factory()
    text = compat.encode_experiment_state({"trial_data": [], "kept": 1}, [trial])
    state = compat.load_experiment_state(text)
    (back,) = compat.experiment_trials(state)
    assert state["kept"] == 1 and back.trial_id == trial.trial_id and back.config == {"a": 1} and not back.stub
    assert compat.trial_finished(back) is False
    back.set_status(Trial.TERMINATED)
    assert compat.trial_finished(back) is True


def test_is_tune_domain():
    from ray import tune

    assert compat.is_tune_domain(tune.uniform(0, 1)) and compat.is_tune_domain(tune.choice([1, 2]))
    assert not compat.is_tune_domain(0.5) and not compat.is_tune_domain({"grid_search": [1, 2]})


def test_set_searcher_objective():
    from ray.tune.search import Searcher

    searcher = Searcher(metric=None, mode=None)
    compat.set_searcher_objective(searcher, "eval/return_mean", "max")
    assert (searcher.metric, searcher.mode) == ("eval/return_mean", "max")
    with pytest.raises(compat.CompatError, match="Searcher._metric"):
        compat.set_searcher_objective(object(), "m", "max")


def test_original_working_dir(tmp_path, monkeypatch):
    import os

    monkeypatch.delenv("TUNE_ORIG_WORKING_DIR", raising=False)
    assert compat.original_working_dir() == os.getcwd()
    monkeypatch.setenv("TUNE_ORIG_WORKING_DIR", str(tmp_path))
    assert compat.original_working_dir() == str(tmp_path)


def test_registered_lowerings_sees_a_registration():
    """The registry the guest test compares: a rule registered for a new primitive appears under
    it, for every platform or for one."""
    from jax.extend.core import Primitive
    from jax.interpreters import mlir

    before = compat.registered_lowerings()
    assert before and all(platform in (None, "cpu", "cuda", "rocm", "tpu") or isinstance(platform, str) for platform, _ in before)
    primitive = Primitive("ajax_tune_compat_test")
    rule = mlir.lower_fun(lambda x: x, multiple_results=False)
    mlir.register_lowering(primitive, rule)
    mlir.register_lowering(primitive, rule, platform="cpu")
    after = compat.registered_lowerings()
    assert set(after) - set(before) == {(None, primitive), ("cpu", primitive)}
    assert after[(None, primitive)] is rule


def test_atexit_callback_count():
    import atexit

    def goodbye():
        pass

    before = compat.atexit_callback_count()
    atexit.register(goodbye)
    try:
        assert compat.atexit_callback_count() == before + 1
    finally:
        atexit.unregister(goodbye)  # CPython keeps its slot: the count stays (a library must not register one)


def test_every_entry_of_compat_is_tested_here():
    """The one door stays checked: each name `ajax_tune.compat` exports is used by a test in this file."""
    import pathlib
    import re

    used = set(re.findall(r"compat\.(\w+)", pathlib.Path(__file__).read_text()))
    assert sorted(set(compat.__all__) - used) == []
    for module in compat.MODULES:  # and every module's names are the package's
        assert all(getattr(compat, name) is getattr(module, name) for name in module.__all__)


def test_read_csv_exactly_reads_back_the_floats_written(tmp_path):
    import pandas as pd

    values = [0.1 * 3, 0.1 * 7, 1 / 3, 1e-300 * 3]
    pd.DataFrame({"x": values}).to_csv(tmp_path / "progress.csv", index=False)
    assert compat.read_csv_exactly(tmp_path / "progress.csv")["x"].tolist() == values


def test_checkpoint_manager_internals(tmp_path):
    """A trial's checkpoint manager registers what `training_result` makes, in order, and lets
    recovery forget some and choose the latest."""
    from ray.train import Checkpoint
    from ray.tune.experiment.trial import Trial

    manager = Trial("AjaxTrainable", stub=True).run_metadata.checkpoint_manager
    assert compat.checkpoint_results(manager) == [] and manager.latest_checkpoint_result is None
    for i in range(3):
        (tmp_path / f"checkpoint_{i:06d}").mkdir()
        result = compat.training_result(Checkpoint(str(tmp_path / f"checkpoint_{i:06d}")), {"training_iteration": i + 1})
        manager.register_checkpoint(result)
    registered = compat.checkpoint_results(manager)
    assert [r.metrics["training_iteration"] for r in registered] == [1, 2, 3]
    assert manager.latest_checkpoint_result.metrics["training_iteration"] == 3
    compat.set_checkpoint_results(manager, registered[:2])
    compat.set_latest_checkpoint_result(manager, registered[1])
    assert len(compat.checkpoint_results(manager)) == 2
    assert manager.latest_checkpoint_result.metrics["training_iteration"] == 2
    compat.set_latest_checkpoint_result(manager, None)
    assert manager.latest_checkpoint_result is None
    with pytest.raises(compat.CompatError, match="_checkpoint_results"):
        compat.checkpoint_results(object())
    with pytest.raises(compat.CompatError, match="_latest_checkpoint_result"):
        compat.set_latest_checkpoint_result(object(), None)


def test_trainable_progress_moves_tunes_counters():
    from ray import tune

    class Counting(tune.Trainable):
        def step(self):
            return {"x": 1.0}

    trainable = Counting()
    trainable.train()
    compat.set_trainable_progress(trainable, {"training_iteration": 5, "time_total_s": 2.5})
    state = trainable.get_state()
    assert (state["iteration"], state["time_total"], state["timesteps_total"]) == (5, 2.5, None)
    assert trainable.train()["training_iteration"] == 6  # Tune counts on from there
    trainable.stop()
    with pytest.raises(compat.CompatError, match="Trainable._iteration"):
        compat.set_trainable_progress(object(), {})


def test_local_ray_cpus():
    import os

    cpus = compat.local_ray_cpus()
    assert 1 <= cpus <= os.cpu_count()


def test_result_grid_defaults(tmp_path):
    from ray.tune import ExperimentAnalysis, ResultGrid

    (tmp_path / "experiment_state-2000-01-01_00-00-00.json").write_text('{"trial_data": []}')
    analysis = ExperimentAnalysis(str(tmp_path), trials=[], default_metric="eval/return_mean", default_mode="max")
    assert compat.result_grid_defaults(ResultGrid(analysis)) == ("eval/return_mean", "max")
    with pytest.raises(compat.CompatError, match="_experiment_analysis"):
        compat.result_grid_defaults(object())


def test_tune_keys_are_tunes_own():
    """The keys experiment.py accepts as metrics besides a trial's own are keys Tune fills in."""
    from ray.tune.result import AUTO_RESULT_KEYS

    from ajax_tune.tune.experiment import TUNE_KEYS

    assert set(AUTO_RESULT_KEYS) >= TUNE_KEYS


def test_no_private_api_outside_compat():
    """Every private API of another library, imports and attribute access alike, is reached
    through `ajax_tune/compat/` (`tests/support/private_api.py` says what counts)."""
    import pathlib

    from tests.support.private_api import private_uses

    assert private_uses(pathlib.Path(compat.__file__).parent.parent) == []


def test_the_private_api_check_finds_each_kind_of_use(tmp_path):
    from tests.support.private_api import private_uses

    package = tmp_path / "pkg"
    package.mkdir()
    (package / "compat.py").write_text("from jax._src import xla_bridge\n")  # the one door: allowed
    (package / "uses.py").write_text(
        "import jax._src.core\n"
        "from ray._private import worker\n"
        "from ray.tune.search.variant_generator import generate_variants\n"
        "from ray.tune.utils import _private_helper\n"
        "from ray.tune import Tuner\n"  # public
        "def f(manager, row):\n"
        "    manager._checkpoint_results = []\n"
        "    getattr(manager, '_storage')\n"
        "    return row._replace(a=1), self_made._mine\n"  # namedtuple API, and a name of our own
        "class Mine:\n"
        "    def __init__(self):\n"
        "        self._mine = 1\n"
    )
    found = private_uses(package)
    assert [line.split(" ", 1)[1] for line in found] == [
        "import jax._src.core",
        "from ray._private import ...",
        "from ray.tune.search.variant_generator import ...",
        "from ray.tune.utils import ...",
        "from ray.tune.utils import _private_helper",
        "._checkpoint_results",
        "getattr(..., '_storage')",
    ]


def test_the_private_api_check_follows_names_built_at_run_time(tmp_path):
    """Module paths and attribute names given as strings are followed as far as the source fixes
    them; a name that arrives as data (a parameter) is not judged."""
    from tests.support.private_api import private_uses

    package = tmp_path / "pkg"
    (package / "compat").mkdir(parents=True)
    (package / "compat" / "jax.py").write_text("import importlib\nimportlib.import_module('jax._src.xla_bridge')\n")  # the door
    (package / "dynamic.py").write_text(
        "import importlib, operator, sys\n"
        "ATTR = '_storage'\n"
        "NAMES = ('public', '_hidden')\n"
        "def f(obj, name, part):\n"
        "    importlib.import_module('ray._private.utils')\n"
        "    __import__('jax._src.monitoring')\n"
        "    importlib.util.find_spec('ray.tune.execution.experiment_state')\n"
        "    sys.modules['jax._src.core']\n"
        "    sys.modules.get('ray._private.worker')\n"
        "    importlib.import_module(f'ray.{part}')\n"
        "    importlib.import_module(f'ajax_tune.cli.{part}')\n"  # our own package: fine
        "    importlib.import_module(name)\n"  # data: not judged
        "    getattr(obj, ATTR)\n"
        "    getattr(obj, '_' + name)\n"
        "    setattr(obj, f'_{name}_cache', 1)\n"
        "    operator.attrgetter('manager._checkpoint_results')(obj)\n"
        "    getattr(obj, name)\n"  # data: not judged
        "    getattr(obj, f'{name}_total')\n"  # cannot be private
        "    return [getattr(obj, n) for n in NAMES]\n"
    )
    found = sorted(line.split(" ", 1)[1] for line in private_uses(package))
    assert found == sorted(
        [
            "import_module('ray._private.utils')",
            "__import__('jax._src.monitoring')",
            "find_spec('ray.tune.execution.experiment_state')",
            "sys.modules('jax._src.core')",
            "sys.modules.get('ray._private.worker')",
            "import_module('ray.'...) built at run time",
            "getattr(..., '_storage')",
            "getattr(..., '_'...) built at run time",
            "setattr(..., '_'...) built at run time",
            "attrgetter(..., 'manager._checkpoint_results')",
            "getattr(..., '_hidden')",
        ]
    )


def test_the_private_api_check_finds_what_a_subclass_takes_from_a_library_class(tmp_path):
    """A class that overrides a private member of a library base, or uses one on `self` (an
    attribute the base's own methods set), reaches a private API as much as an import does."""
    from tests.support.private_api import private_uses

    package = tmp_path / "pkg"
    package.mkdir()
    (package / "classes.py").write_text(
        "from ray import tune\n"
        "from ray.air.integrations.wandb import WandbLoggerCallback\n"
        "from ray.tune.search import Searcher\n"
        "class Trainable(tune.Trainable):\n"
        "    _progress_metrics = ('a',)\n"
        "    _mine = 1\n"  # a name the base does not have: our own
        "class Callback(WandbLoggerCallback):\n"
        "    def _start_logging_actor(self, trial, exclude_results, **kwargs):\n"
        "        pass\n"
        "    def _helper(self):\n"
        "        pass\n"
        "class Search(Searcher):\n"
        "    def set_search_properties(self, metric, mode, config, **spec):\n"
        "        self._metric = metric\n"
        "        self._space = config\n"
        "        return True\n"
    )
    found = sorted(line.split(" ", 1)[1] for line in private_uses(package))
    assert found == [
        "class Callback overrides ray.air.integrations.wandb.WandbLoggerCallback._start_logging_actor",
        "class Trainable overrides ray.tune.Trainable._progress_metrics",
        "self._metric of ray.tune.search.Searcher",
    ]


def test_tunes_variant_generation():
    from ray import tune

    space = {"a": tune.grid_search([1, 2, 3]), "b": {"c": tune.grid_search(["x", "y"])}, "d": tune.uniform(0, 1)}
    assert sorted(compat.grid_sizes(space)) == [2, 3]
    variants = compat.generate_variants(space, constant_grid_search=False, random_state=np.random.default_rng(0))
    assert len(variants) == 6 and {v[("a",)] for v in variants} == {1, 2, 3}
    draws = [v[("d",)] for v in variants]  # the domain drawn afresh for every variant, not passed on
    assert all(isinstance(d, float) for d in draws) and len(set(draws)) == 6


def test_tune_reads_the_result_box_keys_from_the_trainable():
    from ray import tune

    from ajax_tune.tune.output import ResultBox
    from ajax_tune.tune.trainable import AjaxTrainable

    keys = compat.tune_result_keys(AjaxTrainable)
    assert isinstance(keys, ResultBox) and keys is getattr(AjaxTrainable, compat.TUNE_RESULT_KEYS_ATTR)

    class Shown(tune.Trainable):
        pass

    assert compat.tune_result_keys(Shown) is None  # Tune's default: every key
    compat.set_tune_result_keys(Shown, ("a", "b"))
    assert compat.tune_result_keys(Shown) == ("a", "b") and compat.tune_result_keys(tune.Trainable) is None


def test_a_trainables_storage(tmp_path):
    """The trial directory of a trainable's storage, and a next save that never lands on an
    existing checkpoint directory (the driver's count of saves can be one short)."""
    import types

    from ray.train._internal.storage import StorageContext

    storage = StorageContext(str(tmp_path), "exp", trial_dir_name="trial", current_checkpoint_index=0)
    trainable = types.SimpleNamespace(_storage=storage)
    trial_dir = tmp_path / "exp" / "trial"
    assert compat.trial_storage_dir(trainable) == str(trial_dir)
    assert compat.trial_storage_dir(types.SimpleNamespace()) is None  # outside Tune

    for name in ("checkpoint_000000", "checkpoint_000001"):  # two saves, one of them registered
        (trial_dir / name).mkdir(parents=True)
    compat.skip_used_checkpoint_dirs(trainable)
    storage._update_checkpoint_index({})  # what Tune does after save_checkpoint
    assert storage.checkpoint_dir_name == "checkpoint_000002"
    compat.skip_used_checkpoint_dirs(trainable)  # an index past every directory stays as it is
    assert storage.current_checkpoint_index == 2


def test_jit_with_options_compiles_that_program_alone_with_them(monkeypatch):
    f = compat.jit_with_options(lambda x: x + 1, {"xla_backend_optimization_level": 0})
    assert float(f(jnp.ones(()))) == 2.0
    # a jax without jit(compiler_options=...) gets a plain jit and one warning
    monkeypatch.setattr(jax, "jit", lambda fn: ("plain", fn))
    compat.base.warned.discard("jit_with_options")
    with pytest.warns(RuntimeWarning, match="compiler_options"):
        assert compat.jit_with_options(abs, {"a": 1}) == ("plain", abs)
