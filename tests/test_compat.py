"""Every private API ajax_tune uses still exists in the installed jax, ray and brax, and does what
we rely on. When one of these fails after an upgrade, fix `ajax_tune/compat.py`."""

import inspect

import jax
import jax.numpy as jnp
import pytest

from ajax_tune import compat


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


def test_backends_are_initialized():
    jnp.ones(1).block_until_ready()  # this session has started them
    assert compat.backends_are_initialized() is True


def test_brax_env_names():
    names = compat.brax_env_names()
    assert "inverted_pendulum" in names and "ant" in names


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

    assert compat.wandb_clean_config({"a": 1, "f": print})["a"] == 1
    assert {compat.wandb_queue_item(k).name for k in ("RESULT", "CHECKPOINT", "END")} == {"RESULT", "CHECKPOINT", "END"}


def test_tune_choices_name_every_option():
    """experiment.py refuses options the class does not take, reading the class's signature; that
    is exact only while no class in the table takes **kwargs."""
    from ajax_tune.experiment import CHOICES
    from ajax_tune.imports import resolve_import

    for kind, choices in CHOICES.items():
        for name, choice in choices.items():
            if choice.target is None or (choice.requires and not _importable(choice.requires)):
                continue
            cls = resolve_import(choice.target, f"{kind} {name}")
            params = inspect.signature(cls).parameters
            assert not any(p.kind is p.VAR_KEYWORD for p in params.values()), (kind, name)
            for keyword in (choice.seed, choice.concurrency, *choice.defaults, *choice.required, *choice.spaces):
                assert not keyword or keyword in params, (kind, name, keyword)


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


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
