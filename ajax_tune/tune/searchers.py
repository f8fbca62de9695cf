"""Searchers that see members: K suggestions of any Tune searcher packed into one population trial.

A population trial trains K configs as lanes of one compiled program (`population.py`), but a
Tune searcher suggests one config per trial. `PopulationSearcher(searcher, size=K)` sits between
them: for each trial Tune asks for, it asks the wrapped searcher for up to K suggestions, each
under a virtual trial id of its own, and returns one trial config whose `population.members` are
those suggestions (each member the override its suggestion makes). When the trial reports, each
member's values (`member/<k>/<metric>`) go back to the wrapped searcher under that member's
virtual id, so Optuna or HyperOpt learns from every member as from a trial of its own. Ray's
`Repeater` does the reverse (one suggestion, many trials); the bookkeeping is alike.

What counts: `num_samples` is the number of configs (members) drawn in all, not of trials: the
wrapper stops (returns FINISHED) once it has drawn that many, and Tune, which counts trials,
never reaches its own limit first because a trial holds at least one config. 16 samples with
`size=4` are 4 trials of 4 members. A remainder makes a smaller last trial (another program).
Grid points count as configs too, so with a grid of G points `num_samples` must be a multiple of
G (G: each point once); anything else is refused. YAML's `tune.num_samples` keeps Tune's meaning
(each grid point that many times), and `Experiment.tuner` passes the product.

Static settings: members share every static setting, so suggestions that differ in one (a
searched `agent.num_envs`, the env, a network size) cannot share a trial. Suggestions are kept,
grouped by their static part, until a group holds K; that group becomes a trial. When the budget
is drawn, the searcher is finished, or it has nothing to suggest now (None), the fullest group
goes out as it is: nothing is dropped. At most `max_buffered` suggestions wait at a time.

Batches: all K suggestions of a trial are drawn before any of them reports. Optuna's TPE has an
option for exactly that, `constant_liar` (running trials count as if they had scored poorly, so
a batch spreads out); `tune.population` switches it on. HyperOpt has none: its TPE ignores
running trials, so the K suggestions of a pack are independent draws from the same model (they
may cluster until results come back). Random and grid search (`VariantSearcher`, Tune's own
variant generation as a Searcher) need none.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import math
import pickle
import uuid
from collections.abc import Mapping
from typing import Any

import numpy as np
from ray.tune.search import Searcher

from ajax_tune import compat
from ajax_tune.config import resolve_agent
from ajax_tune.errors import ConfigError
from ajax_tune.loop import LoopConfig
from ajax_tune.population.spec import MEMBER_SECTIONS, member_setting, merge
from ajax_tune.results import keys as K
from ajax_tune.ued import settings_class

logger = logging.getLogger(__name__)

#: What a member's report carries besides its own `member/<k>/...` values: Tune's counters.
SHARED_RESULT_KEYS = (*K.TUNE_KEYS, "env_steps", "done", "trial_id")


# -- splitting a suggestion ----------------------------------------------------------------------


def split_suggestion(suggestion: Mapping, agent_name: str) -> tuple[dict, dict]:
    """(shared, member): the suggestion's static part, which its trial must be built with, and
    the override a member may make (traced agent and train settings, and `train.seed`)."""
    _, agent_config = resolve_agent(agent_name)
    per_member = {
        section: {f.name for f in dataclasses.fields(config) if member_setting(section, f)}
        for section, config in (("agent", agent_config), ("train", LoopConfig), ("ued", settings_class(suggestion.get("ued"))))
    }
    shared, member = {}, {}
    for section, values in suggestion.items():
        if section not in MEMBER_SECTIONS or not isinstance(values, Mapping):
            shared[section] = copy.deepcopy(values)
            continue
        for name, value in values.items():
            own = name in per_member[section]
            (member if own else shared).setdefault(section, {})[name] = copy.deepcopy(value)
    return shared, member


def searched_part(suggestion: Mapping, space: Any) -> dict:
    """The suggestion without the constants of the search space it repeats (HyperOpt suggests
    the whole config), so that a member's override holds what the searcher chose."""
    out = {}
    for key, value in suggestion.items():
        if isinstance(space, Mapping) and key in space:
            node = space[key]
            if isinstance(value, Mapping) and isinstance(node, Mapping) and "grid_search" not in node:
                inner = searched_part(value, node)
                if inner:
                    out[key] = inner
                continue
            if _plain(value) == _plain(node):
                continue
        out[key] = copy.deepcopy(value)
    return out


def constants(space: Any) -> Any:
    """The search space without its domains (Tune's, and `grid_search`): what every trial of
    the search runs with whatever is drawn. A mapping left empty is dropped."""
    out = {}
    for key, value in space.items():
        if compat.is_tune_domain(value) or (isinstance(value, Mapping) and "grid_search" in value):
            continue
        if isinstance(value, Mapping):
            inner = constants(value)
            if inner or not value:
                out[key] = inner
            continue
        out[key] = copy.deepcopy(value)
    return out


def _plain(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr)


def _agent_name(config: Mapping | None, suggestion: Mapping) -> str:
    """The agent a suggestion's trial runs: the suggested one, else the search space's."""
    for source in (suggestion, config or {}):
        name = (source.get("agent") or {}).get("name") if isinstance(source.get("agent"), Mapping) else None
        if isinstance(name, str):
            return name
    return "ppo"


def _unflatten(flat: Mapping[tuple, Any]) -> dict:
    out: dict = {}
    for path, value in flat.items():
        node = out
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
    return out


# -- random and grid search as a Searcher --------------------------------------------------------


def grid_points(space: Mapping) -> int:
    """The points of a Tune param_space's grid (1 without one): the product of its grid_search sizes."""
    return math.prod(compat.grid_sizes(space))


class VariantSearcher(Searcher):
    """Tune's random and grid search (its own variant generation, as `BasicVariantGenerator`
    does it) as a `Searcher`, which a `PopulationSearcher` can wrap; `BasicVariantGenerator` is
    a search algorithm of another kind, that makes trials rather than suggestions.

    Each pass over the space yields every grid point once, random domains drawn anew; passes
    repeat until the wrapper's budget is drawn, so `num_samples` configs of a space with a grid
    of G points are the grid num_samples / G times, as Tune's `num_samples` repeats a grid."""

    def __init__(self, random_state: int | None = None, constant_grid_search: bool = False):
        super().__init__(metric=None, mode=None)
        self._rng = np.random.default_rng(random_state)
        self._constant_grid_search = constant_grid_search
        self._space: dict | None = None
        self._queue: list[dict] = []

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict, **spec) -> bool:
        compat.set_searcher_objective(self, metric or self.metric, mode or self.mode)
        self._space = copy.deepcopy(config)
        return True

    def suggest(self, trial_id: str) -> dict | None:
        if self._space is None:
            raise RuntimeError("VariantSearcher has no search space: Tune sets it from the Tuner's param_space")
        if not self._queue:
            variants = compat.generate_variants(self._space, self._constant_grid_search, self._rng)
            self._queue = [_unflatten(resolved) for resolved in variants]
        return self._queue.pop(0)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        """Random and grid draws learn nothing from results."""

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as f:
            pickle.dump(self.__dict__, f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as f:
            self.__dict__.update(pickle.load(f))


# -- the wrapper ---------------------------------------------------------------------------------


@dataclasses.dataclass
class _Pending:
    """A suggestion drawn and not yet in a trial."""

    virtual_id: str
    shared: dict
    member: dict


class PopulationSearcher(Searcher):
    """Packs up to `size` suggestions of `searcher` (default: random and grid search) into each
    trial's `population.members` and reports each member back to `searcher` as its own trial.
    See the module's docstring for what `num_samples` counts and how static settings split.

    `space` (with `metric`, `mode` and `num_samples`) gives the searcher its search space
    itself, for a Tuner given no `param_space`: Tune merges each trial's config into its
    param_space, so a grid or choice whose values are mappings (whole learning-rate schedules)
    would leave its `grid_search` beside the chosen mapping. With `space`, a `param_space` Tune
    passes is ignored."""

    def __init__(
        self,
        searcher: Searcher | None = None,
        size: int = 2,
        max_buffered: int | None = None,
        *,
        space: dict | None = None,
        metric: str | None = None,
        mode: str | None = None,
        num_samples: int | None = None,
    ):
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigError(f"PopulationSearcher: size must be a whole number of members >= 1, got {size!r}")
        self.searcher = searcher if searcher is not None else VariantSearcher()
        self.size = size
        self.max_buffered = max(size, max_buffered or 4 * size)
        super().__init__(metric=self.searcher.metric, mode=self.searcher.mode)
        self._prefix = uuid.uuid4().hex[:6]
        self._drawn = 0  # suggestions taken from the wrapped searcher
        self._budget: int | None = None  # num_samples: configs to draw in all
        self._exhausted = False  # the wrapped searcher said FINISHED
        self._space: dict | None = None
        self._pending: list[_Pending] = []
        self._trials: dict[str, list[str]] = {}  # Tune's trial id -> each member's virtual id
        self._done: set[str] = set()
        self._own_space = space
        if space is not None:
            self.set_search_properties(metric, mode, space, **({} if num_samples is None else {"num_samples": num_samples}))

    # -- Tune's protocol -------------------------------------------------------------------

    def set_search_properties(self, metric: str | None, mode: str | None, config: dict, **spec) -> bool:
        if self._own_space is not None:
            config = self._own_space
            if self._budget is not None:
                spec.pop("num_samples", None)
        self._space = config
        if spec.get("num_samples") is not None:
            self._budget = int(spec["num_samples"])
            points = grid_points(config or {}) if isinstance(self.searcher, VariantSearcher) else 1
            if self._budget % points:
                raise ConfigError(
                    f"PopulationSearcher: num_samples counts configs in all, grid points included; the space's grid "
                    f"has {points} points, so num_samples must be a multiple of {points} ({points}: each point once), "
                    f"got {self._budget}"
                )
        accepted = self.searcher.set_search_properties(metric, mode, config, **spec)
        compat.set_searcher_objective(self, self.searcher.metric or metric, self.searcher.mode or mode)
        return accepted

    def suggest(self, trial_id: str) -> dict | str | None:
        while self._can_draw() and not self._full_group():
            suggestion = self.searcher.suggest(self._next_virtual_id())
            if suggestion == Searcher.FINISHED:
                self._exhausted = True
                break
            if suggestion is None:  # nothing now; what waits goes out rather than waiting on itself
                break
            self._take(suggestion)
        group = self._full_group() or self._fullest_group()
        if group is None:
            return Searcher.FINISHED if self._exhausted or self._budget_drawn() else None
        self._pending = [p for p in self._pending if p not in group]
        self._trials[trial_id] = [p.virtual_id for p in group]
        return self._trial_config(group)

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        for k, virtual_id in enumerate(self._trials.get(trial_id, ())):
            reported = member_result(result, k)
            value = reported.get(self.metric)
            if isinstance(value, (int, float)) and math.isfinite(value):
                self.searcher.on_trial_result(virtual_id, reported)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        if trial_id in self._done or trial_id not in self._trials:
            return
        self._done.add(trial_id)
        for k, virtual_id in enumerate(self._trials[trial_id]):
            self.searcher.on_trial_complete(virtual_id, result=member_result(result, k) if result else None, error=error)

    def member_ids(self, trial_id: str) -> list[str]:
        """The virtual trial ids the wrapped searcher knows the trial's members by, in member order."""
        return list(self._trials.get(trial_id, ()))

    # -- drawing and packing ---------------------------------------------------------------

    def _next_virtual_id(self) -> str:
        return f"{self._prefix}_m{self._drawn:05d}"

    def _budget_drawn(self) -> bool:
        return self._budget is not None and self._drawn >= self._budget

    def _can_draw(self) -> bool:
        return not self._exhausted and not self._budget_drawn() and len(self._pending) < self.max_buffered

    def _take(self, suggestion: Mapping) -> None:
        virtual_id = self._next_virtual_id()
        self._drawn += 1
        suggestion = searched_part(suggestion, self._space)
        shared, member = split_suggestion(suggestion, _agent_name(self._space, suggestion))
        self._pending.append(_Pending(virtual_id, shared, member))

    def _groups(self) -> list[list[_Pending]]:
        """Pending suggestions grouped by their static part, in the order the groups began."""
        groups: dict[str, list[_Pending]] = {}
        for p in self._pending:
            groups.setdefault(json.dumps(p.shared, sort_keys=True, default=repr), []).append(p)
        return list(groups.values())

    def _full_group(self) -> list[_Pending] | None:
        return next((g[: self.size] for g in self._groups() if len(g) >= self.size), None)

    def _fullest_group(self) -> list[_Pending] | None:
        groups = self._groups()
        return max(groups, key=len)[: self.size] if groups else None  # ties: the oldest

    def _trial_config(self, group: list[_Pending]) -> dict:
        """The trial's config: the group's static part, the first member's values as the base
        (so every searched key is set), and the members selected by the searcher's metric."""
        # the space's constants first (the env, the network, the horizon): a searcher suggests
        # only what it draws (Optuna) or has them stripped (`searched_part`), and the Tuner gets
        # no param_space to merge them from; without them a trial ran the defaults (cartpole)
        config = merge(merge(constants(self._space or {}), group[0].shared), group[0].member)
        select = {key: value for key, value in (("metric", self.metric), ("mode", self.mode)) if value}
        config["population"] = {"members": [copy.deepcopy(p.member) for p in group], **({"select": select} if select else {})}
        return config

    # -- saving (Tune saves the wrapped searcher itself, and this state beside it) ---------

    def get_state(self) -> dict:
        state = self.__dict__.copy()
        del state["searcher"]
        return state

    def set_state(self, state: dict) -> None:
        self.__dict__.update(state)

    def save(self, checkpoint_path: str) -> None:
        self.searcher.save(checkpoint_path)

    def restore(self, checkpoint_path: str) -> None:
        self.searcher.restore(checkpoint_path)


def member_result(result: Mapping, member: int) -> dict:
    """What member `member` reported, as a trial of its own would: its `member/<k>/<name>`
    values under `<name>`, and Tune's counters of the trial it ran in."""
    prefix = K.member_key(member, "")
    out = {key: result[key] for key in SHARED_RESULT_KEYS if key in result}
    out.update({key[len(prefix) :]: value for key, value in result.items() if key.startswith(prefix)})
    return out


# -- from a YAML experiment's `tune` section -----------------------------------------------------


def searcher_for(section, space: dict, num_samples: int) -> PopulationSearcher:
    """The experiment's search (`tune.search`, default random) wrapped to pack `tune.population`
    suggestions per trial, with the batch-aware option where the searcher has one, holding the
    search `space` itself (the Tuner gets none). Its options are checked first as
    `check_population_search` checks them (without building anything)."""
    from ajax_tune.tune.choices import build_searcher, check_population_search, parse_choice

    random = check_population_search(section)
    spec = parse_choice("search", section.search)
    if random is not None:
        inner = VariantSearcher(**random)
    else:
        inner = build_searcher(section)  # every option checked against the class's signature
        if spec["name"] == "optuna" and "sampler" not in spec["kwargs"]:
            inner = _optuna_constant_liar(spec["kwargs"], section.seed)
    return PopulationSearcher(
        inner, size=section.population, space=space, metric=section.metric, mode=section.mode, num_samples=num_samples
    )


def _optuna_constant_liar(options: Mapping, default_seed: int):
    """OptunaSearch with TPE's `constant_liar`: a pack's later suggestions see its earlier ones
    as running trials that scored poorly, so a pack spreads over the space instead of drawing K
    times near the same optimum."""
    from optuna.samplers import TPESampler
    from ray.tune.search.optuna import OptunaSearch

    options = dict(options)
    seed = options.pop("seed", default_seed)
    return OptunaSearch(**options, sampler=TPESampler(seed=seed, constant_liar=True))
