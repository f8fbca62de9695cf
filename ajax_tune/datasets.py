"""Datasets of transitions for offline training: the on-disk format, its checks against an env,
its content hash, and collecting one from a policy.

A dataset is a directory:

    DIR/dataset.json    {"format": "ajax_tune.dataset", "version": 1, "env": {"name", "kwargs",
                         "task", "id"}, "size": N, "source": {...}}  (what it came from: the
                         config's env name and kwargs, the task, the env's own name as `id`)
    DIR/data.npz        observations [N, *obs], actions [N, *act] (in the env's own action units:
                        a Box's values, a Discrete's index), rewards [N], terminations [N],
                        truncations [N], next_observations [N, *obs] (the true successor, also the
                        real final observation of a truncated step)

Rows are transitions, each env's trajectory contiguous. A Minari dataset on this machine is read
too, named `minari:<dataset id>` (`from_minari`; the `minari` extra, nothing downloaded).

`load` checks a dataset against the env it will train in (shapes, dtypes, actions inside the
action space, finite rows, not empty) and refuses with one line naming what is wrong;
`content_hash` digests the arrays, so a checkpoint can record which dataset it learned from
without holding its rows.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pathlib
from typing import Any

import gymnasium
import numpy as np

from ajax_tune.errors import ConfigError
from ajax_tune.twins import GYMNASIUM_TWINS

FORMAT = "ajax_tune.dataset"
VERSION = 1
META_FILE = "dataset.json"
DATA_FILE = "data.npz"
FIELDS = ("observations", "actions", "rewards", "terminations", "truncations", "next_observations")
MINARI_PREFIX = "minari:"


class DatasetError(ConfigError):
    """A dataset that is missing, malformed, or does not fit the env or agent it is given to."""


@dataclasses.dataclass(frozen=True)
class Dataset:
    observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminations: np.ndarray
    truncations: np.ndarray
    next_observations: np.ndarray
    env: dict  # {"name", "kwargs", "task", "id"}
    source: dict = dataclasses.field(default_factory=dict)

    @property
    def size(self) -> int:
        return int(self.rewards.shape[0])

    @property
    def nbytes(self) -> int:
        return sum(getattr(self, name).nbytes for name in FIELDS)

    def content_hash(self) -> str:
        """sha256 of every array (name, dtype, shape and bytes) and of the env it came from."""
        digest = hashlib.sha256()
        for name in FIELDS:
            array = np.ascontiguousarray(getattr(self, name))
            digest.update(f"{name}:{array.dtype.str}:{array.shape}".encode())
            digest.update(array.tobytes())
        digest.update(json.dumps(self.env, sort_keys=True, default=repr).encode())
        return digest.hexdigest()

    def save(self, directory) -> pathlib.Path:
        directory = pathlib.Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        np.savez(directory / DATA_FILE, **{name: getattr(self, name) for name in FIELDS})
        meta = {"format": FORMAT, "version": VERSION, "env": self.env, "size": self.size, "source": self.source}
        (directory / META_FILE).write_text(json.dumps(meta, indent=1, default=repr))
        return directory


def read(path) -> Dataset:
    """A dataset as it is on disk, checked for its own consistency (not yet against an env)."""
    if str(path).startswith(MINARI_PREFIX):
        return from_minari(str(path)[len(MINARI_PREFIX) :])
    path = pathlib.Path(path)
    if not (path / META_FILE).is_file() or not (path / DATA_FILE).is_file():
        what = "no such directory" if not path.exists() else f"it needs {META_FILE} and {DATA_FILE}"
        raise DatasetError(f"train.dataset: no dataset at {path} ({what})")
    try:
        meta = json.loads((path / META_FILE).read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DatasetError(f"train.dataset: {path / META_FILE} is corrupt ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise DatasetError(f"train.dataset: {path / META_FILE} is not an ajax_tune dataset (format {FORMAT!r})")
    if meta.get("version") != VERSION:
        raise DatasetError(f"train.dataset: {path} has dataset version {meta.get('version')}; this ajax_tune reads {VERSION}")
    try:
        with np.load(path / DATA_FILE, allow_pickle=False) as data:
            arrays = {name: data[name] for name in FIELDS if name in data}
    except Exception as exc:  # numpy raises several kinds for a damaged archive
        raise DatasetError(f"train.dataset: {path / DATA_FILE} could not be read ({type(exc).__name__}: {exc})") from None
    missing = [name for name in FIELDS if name not in arrays]
    if missing:
        raise DatasetError(f"train.dataset: {path / DATA_FILE} lacks {missing} (a dataset holds {list(FIELDS)})")
    sizes = {name: a.shape[0] if a.ndim else None for name, a in arrays.items()}
    if len(set(sizes.values())) != 1:
        raise DatasetError(f"train.dataset: {path}: every array needs the same number of rows, got {sizes}")
    return Dataset(**arrays, env=dict(meta.get("env") or {}), source=dict(meta.get("source") or {}))


def from_minari(dataset_id: str) -> Dataset:
    """A local Minari dataset (as `minari.load_dataset(dataset_id)` finds it, under
    `MINARI_DATASETS_PATH` or Minari's default folder; never downloaded) as transitions: each
    episode's observations without its last as `observations`, without its first as
    `next_observations`. Its env is named by its gymnasium id, the built-in twins' by theirs
    (`Pendulum-v1` is `pendulum`), so the env check applies as to any dataset."""
    try:
        import minari
    except ImportError:
        raise DatasetError(
            f'train.dataset: minari:{dataset_id} needs the minari package: pip install "ajax-tune[minari]"'
        ) from None
    local = minari.list_local_datasets()
    if dataset_id not in local:
        known = ", ".join(sorted(local)) or "none"
        raise DatasetError(f"train.dataset: no local Minari dataset {dataset_id!r} (nothing is downloaded); local: {known}")
    data = minari.load_dataset(dataset_id)
    parts: dict[str, list] = {name: [] for name in FIELDS}
    for episode in data.iterate_episodes():
        obs = episode.observations
        if not isinstance(obs, np.ndarray):  # a dict or tuple space's
            raise DatasetError(f"train.dataset: minari:{dataset_id} has structured observations; ajax_tune reads arrays")
        parts["observations"].append(obs[:-1])
        parts["next_observations"].append(obs[1:])
        parts["actions"].append(np.asarray(episode.actions))
        parts["rewards"].append(np.asarray(episode.rewards))
        parts["terminations"].append(np.asarray(episode.terminations))
        parts["truncations"].append(np.asarray(episode.truncations))
    if not parts["rewards"]:
        raise DatasetError(f"train.dataset: minari:{dataset_id} holds no episodes")
    arrays = {name: np.concatenate(chunks) for name, chunks in parts.items()}
    for name in ("observations", "next_observations", "rewards"):
        arrays[name] = arrays[name].astype(np.float32, copy=False)
    arrays["terminations"] = arrays["terminations"].astype(bool, copy=False)
    arrays["truncations"] = arrays["truncations"].astype(bool, copy=False)
    if np.issubdtype(arrays["actions"].dtype, np.integer):
        arrays["actions"] = arrays["actions"].astype(np.int32, copy=False)
    elif arrays["actions"].dtype == np.float64:
        arrays["actions"] = arrays["actions"].astype(np.float32)
    gym_id = data.env_spec.id if data.env_spec is not None else None
    twins = {twin: name for name, twin in GYMNASIUM_TWINS.items()}
    env = {"name": twins.get(gym_id, gym_id), "kwargs": {}, "task": {}, "id": twins.get(gym_id, gym_id)}
    source = {
        "minari": dataset_id,
        "episodes": int(data.total_episodes),
        "algorithm": data.storage.metadata.get("algorithm_name"),
    }
    return Dataset(**arrays, env=env, source=source)


def load(path, env, *, continuous: bool | None = None) -> Dataset:
    """`read` and `check` in one: a dataset that fits `env` (and an agent needing continuous
    actions, with `continuous=True`; discrete ones with `False`)."""
    dataset = read(path)
    check(dataset, env, continuous=continuous, where=str(path))
    return dataset


def check(dataset: Dataset, env, *, continuous: bool | None = None, where: str = "the dataset") -> None:
    """One line naming the first thing about `dataset` that does not fit `env`."""
    prefix = f"train.dataset {where}"
    if dataset.size == 0:
        raise DatasetError(f"{prefix} is empty: it holds no transitions")
    obs_space, act_space = env.observation_space, env.action_space
    # the env's own name (`id`), and the config's name for it (`name`: a registered name, or an
    # import path, which names no env by itself); either naming another env refuses the dataset
    for key in ("id", "name"):
        name = dataset.env.get(key)
        if name and ":" not in str(name) and name != env.name:
            raise DatasetError(f"{prefix} was collected in env {name!r} (its env.{key}); this trial's env is {env.name!r}")
    for field in ("observations", "next_observations"):
        array = getattr(dataset, field)
        if array.shape[1:] != tuple(obs_space.shape) or array.dtype != np.float32:
            raise DatasetError(
                f"{prefix}: {field} are {array.dtype}{list(array.shape[1:])} per row; the env's observations are "
                f"float32{list(obs_space.shape)}"
            )
    actions = dataset.actions
    discrete_data = np.issubdtype(actions.dtype, np.integer)
    if continuous and discrete_data:
        raise DatasetError(f"{prefix} has discrete actions ({actions.dtype}); this agent learns continuous actions (a Box)")
    if continuous is False and not discrete_data:
        raise DatasetError(f"{prefix} has continuous actions ({actions.dtype}); this agent learns discrete actions")
    if isinstance(act_space, gymnasium.spaces.Discrete):
        if not discrete_data or actions.shape[1:] != ():
            raise DatasetError(
                f"{prefix}: actions are {actions.dtype}{list(actions.shape[1:])} per row; the env's action space "
                f"{act_space} takes one integer"
            )
        bad = (actions < 0) | (actions >= act_space.n)
    else:
        if discrete_data or actions.shape[1:] != tuple(act_space.shape) or actions.dtype != np.float32:
            raise DatasetError(
                f"{prefix}: actions are {actions.dtype}{list(actions.shape[1:])} per row; the env's action space "
                f"{act_space} takes float32{list(act_space.shape)}"
            )
        tolerance = 1e-5 * np.maximum(1.0, np.abs(act_space.high - act_space.low))
        outside = (actions < act_space.low - tolerance) | (actions > act_space.high + tolerance)
        bad = outside.reshape(len(actions), -1).any(axis=1) | ~np.isfinite(actions).reshape(len(actions), -1).all(axis=1)
    if bad.any():
        row = int(np.argmax(bad))
        raise DatasetError(
            f"{prefix}: {int(bad.sum())} action(s) outside the action space {act_space}, the first in row {row}: {actions[row]}"
        )
    for field in ("observations", "next_observations", "rewards"):
        array = getattr(dataset, field).reshape(dataset.size, -1)
        rows = ~np.isfinite(array).all(axis=1)
        if rows.any():
            raise DatasetError(
                f"{prefix}: {int(rows.sum())} row(s) with NaN or infinite {field}, the first is row {int(np.argmax(rows))}"
            )
    for field in ("rewards", "terminations", "truncations"):
        if getattr(dataset, field).shape[1:] != ():
            raise DatasetError(f"{prefix}: {field} must hold one value per row, got shape {list(getattr(dataset, field).shape)}")


# -- collecting ---------------------------------------------------------------------------------


def collect(
    env,
    steps: int,
    *,
    agent: Any = None,
    agent_state: Any = None,
    epsilon: float = 0.0,
    task: dict | None = None,
    seed: int = 0,
    num_envs: int = 8,
    env_config: dict | None = None,
    source: dict | None = None,
) -> Dataset:
    """`steps` transitions of `env` (an `EpisodeWrapper`) in `num_envs` lock-step envs, acting
    with the deterministic policy of `agent` (one lane's state), or uniformly at random where
    there is no agent and, with probability `epsilon`, at each step."""
    import jax
    import jax.numpy as jnp

    from ajax_tune.envs.base import task_to_jax
    from ajax_tune.envs.wrappers import VecEnv

    if steps < 1:
        raise ConfigError(f"collect: --steps must be >= 1, got {steps}")
    if not 0.0 <= epsilon <= 1.0:
        raise ConfigError(f"collect: --epsilon must be in [0, 1], got {epsilon}")
    num_envs = max(1, min(num_envs, steps))
    length = -(-steps // num_envs)
    venv = VecEnv(env, num_envs)
    task = env.validate_task(task or {})
    space = env.action_space

    def uniform(key):
        if isinstance(space, gymnasium.spaces.Discrete):
            return jax.random.randint(key, (num_envs,), 0, space.n)
        return jax.random.uniform(key, (num_envs, *space.shape), jnp.float32, space.low, space.high)

    def policy(obs, key):
        k_act, k_coin, k_random = jax.random.split(key, 3)
        random = uniform(k_random)
        if agent is None:
            return random
        action, _ = agent.act(agent_state, obs, k_act, deterministic=True)
        coin = jax.random.uniform(k_coin, (num_envs,)) < epsilon
        return jnp.where(coin.reshape(-1, *([1] * (action.ndim - 1))), random, action).astype(random.dtype)

    def step(state, key):
        k_act, k_env, k_reset = jax.random.split(key, 3)
        action = policy(state.obs, k_act)
        nxt = venv.step_each(state, action, jax.random.split(k_env, num_envs))
        row = (state.obs, action, nxt.reward, nxt.terminated, nxt.truncated, nxt.obs, nxt.episode.ret)
        return venv.reset_done_each(nxt, jax.random.split(k_reset, num_envs)), row

    @jax.jit
    def run(key):
        k_reset, k_steps = jax.random.split(key)
        state = venv.reset(k_reset, task_to_jax(task))
        return jax.lax.scan(step, state, jax.random.split(k_steps, length))[1]

    rows = jax.device_get(run(jax.random.PRNGKey(seed)))
    # [length, num_envs, ...] -> env-major rows, each env's trajectory contiguous, cut to `steps`
    arrays = [np.asarray(np.swapaxes(x, 0, 1).reshape(length * num_envs, *x.shape[2:]))[:steps] for x in rows]
    obs, actions, rewards, terminations, truncations, next_obs, episode_return = arrays
    ended = terminations | truncations
    returns = episode_return[ended]
    if isinstance(space, gymnasium.spaces.Discrete):
        actions = actions.astype(np.int32)
    config = env_config or {"name": env.name, "kwargs": {}}
    return Dataset(
        observations=obs.astype(np.float32),
        actions=actions if actions.dtype == np.int32 else actions.astype(np.float32),
        rewards=rewards.astype(np.float32),
        terminations=terminations.astype(bool),
        truncations=truncations.astype(bool),
        next_observations=next_obs.astype(np.float32),
        env={**config, "id": env.name, "task": {k: np.asarray(v).tolist() for k, v in task.items()}},
        source={
            "policy": "random" if agent is None else "agent",
            "epsilon": float(epsilon),
            "seed": int(seed),
            "num_envs": num_envs,
            "episodes": int(ended.sum()),  # finished within the dataset; their mean return below
            "return_mean": float(returns.mean()) if returns.size else float("nan"),
            **(source or {}),
        },
    )


def concatenate(parts: list[Dataset], source: dict | None = None) -> Dataset:
    """One dataset of the rows of `parts` (of one env), in order: a mixed dataset."""
    if len({json.dumps(p.env, sort_keys=True, default=repr) for p in parts}) != 1:
        raise DatasetError("datasets to concatenate must come from one env (name, kwargs and task)")
    arrays = {name: np.concatenate([getattr(p, name) for p in parts]) for name in FIELDS}
    return Dataset(**arrays, env=parts[0].env, source=source or {"parts": [p.source for p in parts]})
