"""W&B logging, offline, read back from the run file it writes.

wandb 0.31 offline writes only `run-<id>.wandb` (no config.yaml, no wandb-summary.json: those
appear on sync), so the tests decode that file: a LevelDB-style log of protobuf `Record`s.
"""

import json
import math
import pathlib
import struct
import time

import pytest
from ray import tune
from wandb.proto import wandb_internal_pb2

from ajax_tune import AjaxTrainable, compat
from ajax_tune.tune.output import trial_dirname
from ajax_tune.tune.wandb_logging import _EnvStepLoggingActor, wandb_callback
from tests.support.helpers import corridor_config

BUDGET = 4 * 8 * 16  # env steps per seed per train() in corridor_config
LEVELS = {"length": [4, 8, 12, 16]}
BLOCK, HEADER = 32768, 7


def read_offline_run(run_dir: pathlib.Path, wait_s: float = 60.0) -> tuple[dict, list[dict], list]:
    """(config, history rows, metric definitions) of one offline run directory.

    `wandb.finish()` can return before W&B's writer has flushed the file, so this waits (up to
    `wait_s`) for the run's closing `exit` record."""
    deadline = time.monotonic() + wait_s
    while True:
        (path,) = run_dir.glob("*.wandb")
        config, rows, metrics, complete = _decode(path)
        if complete or time.monotonic() > deadline:
            assert complete, f"{path} has no exit record after {wait_s} s"
            return config, rows, metrics
        time.sleep(0.2)


def _decode(path: pathlib.Path) -> tuple[dict, list[dict], list, bool]:
    data = path.read_bytes()
    assert data[:4] == b":W&B" or len(data) <= HEADER, f"{path} is not a W&B run file"
    config, rows, metrics, pos, chunk, complete = {}, [], [], HEADER, b"", False
    while pos + HEADER <= len(data):
        if BLOCK - pos % BLOCK < HEADER:  # a block's zero-padded tail
            pos += BLOCK - pos % BLOCK
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + HEADER])
        if pos + HEADER + length > len(data):
            break  # a record still being written
        chunk += data[pos + HEADER : pos + HEADER + length]
        pos += HEADER + length
        if kind not in (1, 4):  # FIRST or MIDDLE of a record spanning blocks
            continue
        record, chunk = wandb_internal_pb2.Record.FromString(chunk), b""
        which = record.WhichOneof("record_type")
        if which == "run":
            config.update({u.key: json.loads(u.value_json) for u in record.run.config.update})
        elif which == "config":
            config.update({u.key: json.loads(u.value_json) for u in record.config.update})
        elif which == "history":
            rows.append({u.key or "/".join(u.nested_key): json.loads(u.value_json) for u in record.history.item})
        elif which == "metric":
            metrics.append(record.metric)
        elif which == "exit":
            complete = True
    return config, rows, metrics, complete


def same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


@pytest.fixture
def wandb_env(tmp_path, monkeypatch):
    for name in ("WANDB_API_KEY", "WANDB_MODE", "WANDB_PROJECT_NAME", "WANDB_GROUP_NAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb_root"))
    monkeypatch.setenv("WANDB_START_METHOD", "thread")  # the actor sets it; restored afterwards
    return tmp_path / "wandb_root"


def test_mode_is_offline_without_a_key(wandb_env, monkeypatch, caplog):
    callback = wandb_callback()
    assert callback.mode == "offline" and callback.kwargs["mode"] == "offline"
    assert "W&B runs offline (WANDB_API_KEY is not set)" in caplog.text and str(wandb_env) in caplog.text
    assert callback.kwargs["dir"] == str(wandb_env.resolve())
    assert callback.kwargs["reinit"] == "finish_previous"  # Ray's True makes wandb warn in every trial
    callback.setup()  # Ray's would raise for the missing API key
    assert wandb_callback(mode="disabled").mode == "disabled"
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    assert wandb_callback().mode == "online"
    assert wandb_callback(mode="offline").mode == "offline"


def test_reinit_is_what_the_installed_wandb_takes_without_a_warning(wandb_env, tmp_path, monkeypatch, capsys):
    import wandb

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("WANDB_SILENT")  # the deprecation warning is a terminal warning
    value = wandb_callback().kwargs["reinit"]
    assert not isinstance(value, bool)
    run = wandb.init(project="ajax-tune-test", mode="offline", dir=str(tmp_path), reinit=value)
    run.finish()
    assert "deprecated" not in capsys.readouterr().err
    run = wandb.init(project="ajax-tune-test", mode="offline", dir=str(tmp_path), reinit=True)
    run.finish()
    assert "boolean value for 'reinit' is deprecated" in capsys.readouterr().err  # what Ray's default prints


@pytest.mark.usefixtures("ray_session")
def test_tune_run_logs_every_iteration_against_env_steps(wandb_env, tmp_path):
    callback = wandb_callback(project="ajax-tune-test", mode="offline")
    space = corridor_config(
        length=4,
        callbacks=[{"class": "ajax_tune.curriculum:ThresholdCurriculum", "kwargs": {"levels": LEVELS, "threshold": 1.0}}],
    )
    results = tune.Tuner(
        AjaxTrainable,
        param_space=space,
        tune_config=tune.TuneConfig(trial_dirname_creator=trial_dirname),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path / "results"), name="wandb", stop={"training_iteration": 3}, verbose=0, callbacks=[callback]
        ),
    ).fit()
    assert results.num_errors == 0, [r.error for r in results if r.error]
    result = results[0]
    trial_id = result.metrics["trial_id"]
    assert callback.run_dirs == {trial_id: wandb_env.resolve() / "wandb"}
    (run_dir,) = (wandb_env / "wandb").glob(f"offline-run-*-{trial_id}")

    config, rows, metrics = read_offline_run(run_dir)
    expected = result.metrics_dataframe.sort_values("training_iteration").to_dict("records")
    assert len(rows) == len(expected) == 3
    assert [r["env_steps"] for r in rows] == [BUDGET * i for i in (1, 2, 3)]
    assert [r["training_iteration"] for r in rows] == [1, 2, 3]
    for row, want in zip(rows, expected):
        for key in ("eval/return_mean", "eval/return_seed1", "lr", "curriculum/task/length", "curriculum/level"):
            assert same(float(row[key]), float(want[key])), key
        assert row["config/agent/lr"] == space["agent"]["lr"]  # log_config: the config as charts too
    assert "done" not in rows[0]

    assert config["agent"]["lr"] == space["agent"]["lr"]
    assert config["env"]["task"] == {"length": 4}
    assert config["callbacks"][0]["kwargs"]["levels"] == LEVELS  # Ray drops "callbacks"; kept here
    assert config["trial_id"] == trial_id
    by_name = {m.name or m.glob_name: m for m in metrics}
    assert by_name["*"].step_metric == "env_steps" and "env_steps" in by_name


class ListQueue:
    def __init__(self, items):
        self.items = list(items)

    def get(self):
        return self.items.pop(0)


def log_in_process(actor_cls, results, directory: pathlib.Path, run_id: str):
    """The logging actor's `run`, in this process, fed a fixed queue."""
    items = [(compat.wandb_queue_item("RESULT"), r) for r in results] + [(compat.wandb_queue_item("END"), None)]
    actor = actor_cls(
        logdir=str(directory),
        queue=ListQueue(items),
        exclude=["done"],
        to_config=["trial_id"],
        id=run_id,
        name=run_id,
        project="ajax-tune-test",
        mode="offline",
        dir=str(directory),
        reinit=True,
        resume=False,
        allow_val_change=True,
        config={"agent": {"lr": 1e-3}},
    )
    actor.run()
    (run_dir,) = (directory / "wandb").glob(f"offline-run-*-{run_id}")
    return read_offline_run(run_dir)


def test_pbt_rewinds_drop_no_row_and_mutations_reach_the_config(wandb_env, tmp_path, monkeypatch):
    """An exploit at iteration 3 rewinds to the donor's iteration 2 with a mutated lr."""
    monkeypatch.chdir(tmp_path)  # the actor changes directory; this restores it
    lineage = [(1, 1e-3), (2, 1e-3), (3, 1e-3), (3, 4e-3), (4, 4e-3)]  # (iteration of the lineage, lr)
    results = [
        {
            "training_iteration": it,
            "env_steps": it * BUDGET,
            "timesteps_this_iter": BUDGET,
            "lr": lr,
            "config": {"agent": {"lr": lr}},
            "trial_id": "pbt",
            "done": False,
        }
        for it, lr in lineage
    ]
    results[3]["training_iteration"] = 2  # Tune reports the donor's count, plus one, after an exploit
    results[4]["training_iteration"] = 3

    config, rows, _ = log_in_process(_EnvStepLoggingActor, results, tmp_path, "pbt")
    assert [r["env_steps"] for r in rows] == [r["env_steps"] for r in results]
    assert [r["lr"] for r in rows] == [lr for _, lr in lineage]
    assert [r["config/agent/lr"] for r in rows] == [lr for _, lr in lineage]
    assert config["agent"]["lr"] == 4e-3 and config["trial_id"] == "pbt"

    # what this fixes: Ray's actor logs at step=training_iteration; W&B drops the rewound row and
    # merges the next into the pre-exploit row of the same step (wandb 0.31: env_steps 1, 2, 4 x BUDGET)
    _, ray_rows, _ = log_in_process(compat.wandb_logging_actor(), results, tmp_path, "ray")
    assert len(ray_rows) < len(results)


def test_a_run_with_wandb_ends_with_a_video_of_its_best_trial(wandb_env, ray_session, tmp_path, capsys):
    """`ajax-tune run --wandb`: after the report, the best trial's kept checkpoint plays one
    episode in gymnasium's CartPole-v1; the video is written beside the trials and logged to a W&B
    run of its own (offline here: its media folder holds it)."""
    import imageio.v2 as imageio

    from ajax_tune.cli import main

    config = tmp_path / "video.yaml"
    config.write_text(
        "name: video\n"
        "trial: {env: {name: cartpole}, agent: {num_envs: 8, unroll_length: 16}, "
        "train: {total_timesteps: 256, timesteps_per_iteration: 128, eval_episodes: 2}}\n"
        "stop: {training_iteration: 2}\ncheckpoint: {at_end: true}\n"  # the video plays the one at the end
    )
    assert main(["run", str(config), "--wandb", "--storage-path", str(tmp_path / "results"), "--no-plots"]) == 0
    line = next(text for text in capsys.readouterr().out.splitlines() if text.startswith("W&B video: "))
    video = tmp_path / "results" / "video" / "best_trial.mp4"
    assert line.startswith(f"W&B video: {video} (") and video.is_file()
    frames = imageio.mimread(video)
    assert int(line.split("(")[1].split(" frames")[0]) == len(frames) >= 9  # the reset's frame and one per step
    logged = list((wandb_env / "wandb").glob("offline-run-*/files/media/videos/**/*.mp4"))
    assert len(logged) == 1 and logged[0].stat().st_size > 0
