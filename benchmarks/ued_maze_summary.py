"""The maze parity study's reductions, from worker outputs to the JSON: each process's curves and
timings (`peer_unit`, `ours_unit`), over seeds the medians and ranges and a verdict per curve
(`summarise`), and `--part update`'s split of one recurrent update (`update_summary`).

The verdict rule: a curve is within seed noise when the two sides' seed ranges (min to max)
overlap at 80% (`OVERLAP_NEEDED`) or more of the evaluations after the buffer's minimum fill;
it differs otherwise. For 3 seeds a side drawn from one distribution, the ranges are disjoint at
one evaluation with probability 2/20 (all three of one side below all three of the other, or
above), so they overlap at 90% of evaluations in expectation; a shift of one seed standard
deviation brings that down to 73%, of half of one to 86% (simulated, normal seeds). The medians
inside the other side's range are reported too (60% expected per side for 3 seeds against 3).
"""

from __future__ import annotations

import math
import statistics

#: The four curves, each per evaluation: training return, buffer mean score, mean shortest path
#: of the buffer's solvable levels, held-out solve rate (JaxUED's protocol on both sides).
CURVES = ("train_return", "score_mean", "shortest_path_mean", "solve_rate")
#: What each process keeps besides, per evaluation; the summary gives their spread at the end.
EXTRAS = ("unsolvable_share", "gradient_updates", "buffer_size")
KEPT = ("update", *CURVES, *EXTRAS)
SIDES = ("jaxued", "ajax_tune")
OVERLAP_NEEDED = 0.8
#: A chunk that compiled for longer than this is left out of the per-update seconds.
COMPILING_CHUNK_S = 0.5


def _value(v):
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


def spread(values) -> dict:
    values = [v for v in map(_value, values) if v is not None]
    if not values:
        return {}
    return {
        "median": round(statistics.median(values), 4),
        "min": round(min(values), 4),
        "max": round(max(values), 4),
        "n": len(values),
    }


def columns(points: list[dict], keys=None) -> dict[str, list]:
    """Rows of one key set as one list per key: how the JSON keeps curves (a line per key)."""
    keys = keys or (list(points[0]) if points else [])
    return {k: [p.get(k) for p in points] for k in keys}


def rows(cols: dict[str, list]) -> list[dict]:
    """`columns` undone."""
    n = len(next(iter(cols.values()))) if cols else 0
    return [{k: v[i] for k, v in cols.items()} for i in range(n)]


def side_curve(row: dict, metric: str, side: str) -> list[dict]:
    """One side's stored curve (`summarise`) as points with their update; evaluations without a
    value left out."""
    stored = (
        row["over_seeds"][metric][side]
        if side in SIDES
        else row.get("variants", {}).get(side, {}).get("over_seeds", {}).get(metric)
    )
    if not stored:
        return []
    points = rows({"update": row["updates"][: len(stored["median"])], **stored})
    return [p for p in points if p["median"] is not None]


# -- one process ----------------------------------------------------------------------------


def _timing(process_s: float, saving_s: float, compile_s: float, evals: list[dict], replay_from: int) -> dict:
    """A process's wall clock without the saves this study makes, its compile time, and seconds
    per update (a chunk of updates and their evaluation, over the updates; wall clock, and the
    process's CPU time, steadier on a busy machine) before replay can start and once it can,
    chunks that compiled left out."""
    before, replaying, start = [], [], 0
    for e in evals:
        updates, compiled = e["update"] - start, e["chunk_compile_s"] >= COMPILING_CHUNK_S
        if updates > 0 and not compiled and e["update"] <= replay_from:
            before.append((e, updates))
        elif updates > 0 and not compiled and start >= replay_from:  # a chunk across the fill is in neither
            replaying.append((e, updates))
        start = e["update"]

    def per_update(chunks: list[tuple[dict, int]], key: str):
        return statistics.median(e[key] / updates for e, updates in chunks) if chunks else None

    return {
        "process_s": round(process_s - saving_s, 2),
        "saving_s": round(saving_s, 2),
        "compile_s": round(compile_s, 2),
        "s_per_update_before_replay": per_update(before, "chunk_s"),
        "s_per_update_replaying": per_update(replaying, "chunk_s"),
        "cpu_s_per_update_before_replay": per_update(before, "chunk_cpu_s"),
        "cpu_s_per_update_replaying": per_update(replaying, "chunk_cpu_s"),
    }


def peer_unit(out: dict, levels: list[dict] | None, replay_from: int) -> dict:
    """One maze_plr.py process: per evaluation the curves (the buffer's from its checkpoints,
    its own logged mean score kept beside) and its timings."""
    levels = levels or [None] * len(out["evals"])
    evals = []
    for e, lv in zip(out["evals"], levels, strict=True):
        if lv is not None and lv["update"] != e["num_updates"]:
            raise ValueError(f"checkpoint of update {lv['update']} read as the evaluation after update {e['num_updates']}")
        lv = lv or {}
        evals.append(
            {
                "update": e["num_updates"],
                "train_return": e.get("train_return"),
                "score_mean": lv.get("score_mean"),
                "shortest_path_mean": lv.get("shortest_path_mean"),
                "solve_rate": e["solve_rate"].get("mean"),
                "unsolvable_share": lv.get("unsolvable_share"),
                "buffer_size": e["level_sampler"].get("size"),
                "gradient_updates": lv.get("gradient_updates"),
                "logged_score_mean": e["level_sampler"].get("mean_score"),
                "chunk_s": round(e["chunk_s"] - e.get("chunk_saving_s", 0.0), 3),
                "chunk_cpu_s": e["chunk_cpu_s"],
                "chunk_compile_s": e["chunk_compile_s"],
            }
        )
    timing = _timing(out["process_s"], out.get("saving_s", 0.0), out["compile_s"], evals, replay_from)
    timing["tap_host_s"] = out.get("tap_host_s")
    return kept(evals, timing)


def ours_unit(out: dict, levels: list[dict] | None, replay_from: int) -> dict:
    """One ajax_tune process, in the same shape as `peer_unit`'s."""
    levels = levels or [None] * len(out["calls"])
    evals = []
    for c, lv in zip(out["calls"], levels, strict=True):
        lv = lv or {}
        evals.append(
            {
                "update": c["call"] * out["updates_per_call"],
                "train_return": c.get("train/episode_return_mean"),
                "score_mean": lv.get("score_mean"),
                "shortest_path_mean": lv.get("shortest_path_mean"),
                "solve_rate": c.get("eval/heldout/success_rate_mean"),
                "unsolvable_share": lv.get("unsolvable_share"),
                "buffer_size": c.get("ued/buffer_size"),
                "gradient_updates": lv.get("gradient_updates"),
                "logged_score_mean": c.get("ued/score_mean"),
                "chunk_s": c["wall_s"],
                "chunk_cpu_s": c["cpu_s"],
                "chunk_compile_s": c["compile_s"],
            }
        )
    timing = _timing(out["process_s"], out.get("saving_s", 0.0), out["compile_s"], evals, replay_from)
    return kept(evals, timing)


# -- over seeds -------------------------------------------------------------------------------


def kept(evals: list[dict], timing: dict) -> dict:
    """What the JSON keeps of one process: per evaluation the curves and what they rest on (a
    list per key), its timings, and how far its own logged buffer mean is from the one read from
    its saved buffer; its chunks' seconds stay in the raw record."""
    gaps = [
        abs(e["logged_score_mean"] - e["score_mean"])
        for e in evals
        if _value(e["logged_score_mean"]) is not None and _value(e["score_mean"]) is not None
    ]
    return {
        "per_evaluation": columns(evals, KEPT),
        "timing": timing,
        "logged_score_mean_max_abs_difference": max(gaps, default=None),
    }


def curve(units: list[dict], metric: str) -> dict[str, list]:
    """Per evaluation (columns): the update and the spread of `metric` over the units (seeds)."""
    evals = [rows(u["per_evaluation"]) for u in units]
    n = min(map(len, evals), default=0)
    points = [{"update": evals[0][i]["update"], **spread(e[i][metric] for e in evals)} for i in range(n)]
    return columns(points, ("update", "median", "min", "max", "n"))


def last(units: list[dict], metric: str) -> dict:
    """The spread of `metric` over the units at their last evaluation."""
    return spread(u["per_evaluation"][metric][-1] for u in units if u["per_evaluation"][metric])


def verdict(ours: list[dict], peer: list[dict], from_update: int) -> dict:
    """Both sides' curves (`curve`) compared at the evaluations after `from_update` where both
    have values: how often the seed ranges overlap (the rule), how often each median lies in
    the other's range, how often ours is above, and the median gap (ours less the peer's)."""
    pairs = [
        (o, p)
        for o, p in zip(rows(ours), rows(peer))
        if o["update"] == p["update"] and o["update"] > from_update and o["n"] and p["n"]
    ]
    if not pairs:
        return {"evaluations": 0, "verdict": "no evaluations to compare"}

    def share(test) -> float:
        return round(sum(1 for o, p in pairs if test(o, p)) / len(pairs), 3)

    out = {
        "evaluations": len(pairs),
        "ranges_overlap": share(lambda o, p: max(o["min"], p["min"]) <= min(o["max"], p["max"])),
        "ours_median_in_peer_range": share(lambda o, p: p["min"] <= o["median"] <= p["max"]),
        "peer_median_in_our_range": share(lambda o, p: o["min"] <= p["median"] <= o["max"]),
        "ours_median_above": share(lambda o, p: o["median"] > p["median"]),
        "median_gap": round(statistics.median(o["median"] - p["median"] for o, p in pairs), 4),
        "gap_at_end": round(pairs[-1][0]["median"] - pairs[-1][1]["median"], 4),
    }
    values = [v for o, p in pairs for v in (o["min"], o["max"], p["min"], p["max"])]
    if max(values) - min(values) < 1e-9:
        out["verdict"] = f"no signal: both sides at {values[0]} throughout"
    elif min(n for o, p in pairs for n in (o["n"], p["n"])) < 2:
        out["verdict"] = "one seed a side: no range to compare"
    else:
        out["verdict"] = "within seed noise" if out["ranges_overlap"] >= OVERLAP_NEEDED else "differs"
    return out


def timing_summary(peer: list[dict], ours: list[dict]) -> dict:
    keys = (
        "process_s",
        "compile_s",
        "s_per_update_before_replay",
        "s_per_update_replaying",
        "cpu_s_per_update_before_replay",
        "cpu_s_per_update_replaying",
    )
    out = {
        side: {k: spread(u["timing"][k] for u in units) for k in keys} for side, units in (("jaxued", peer), ("ajax_tune", ours))
    }
    if peer and ours:
        out["jaxued_over_ajax_tune"] = {
            k: round(out["jaxued"][k]["median"] / out["ajax_tune"][k]["median"], 3)
            for k in keys
            if out["jaxued"][k] and out["ajax_tune"][k] and out["ajax_tune"][k]["median"]
        }
    return out


def summarise(units: dict, algorithms, replay_from: int) -> dict:
    """Per algorithm: both sides' curves (median and range over seeds per evaluation), a verdict
    per curve, timings over seeds, and the checks behind the buffer figures. `units` maps
    `side/algorithm/seed` to `peer_unit` or `ours_unit` records."""
    out = {}
    for algorithm in algorithms:
        sides = {side: [units[k] for k in sorted(units) if k.startswith(f"{side}/{algorithm}/")] for side in SIDES}
        curves = {metric: {side: curve(sides[side], metric) for side in SIDES} for metric in CURVES}
        longest = max((c["update"] for c in curves[CURVES[0]].values()), key=len)
        row = {
            "seeds": {side: len(sides[side]) for side in SIDES},
            "verdicts": {m: verdict(curves[m]["ajax_tune"], curves[m]["jaxued"], replay_from) for m in CURVES},
            "timing": timing_summary(sides["jaxued"], sides["ajax_tune"]),
            # per evaluation (after `updates`), each side's median and range over seeds
            "updates": longest,
            "over_seeds": {
                m: {side: {k: c[k] for k in ("median", "min", "max")} for side, c in e.items()} for m, e in curves.items()
            },
        }
        # what the curves rest on, over seeds at the last evaluation
        row["at_end"] = {m: {side: last(sides[side], m) for side in SIDES} for m in EXTRAS}
        # each side's own logged buffer mean against the figure read from its saved buffer
        row["score_mean_logged_against_saved_max_abs_difference"] = {
            side: max((d for u in sides[side] if (d := u["logged_score_mean_max_abs_difference"]) is not None), default=None)
            for side in SIDES
        }
        for variant in sorted({k.split("/")[0] for k in units} - set(SIDES)):
            own = [units[k] for k in sorted(units) if k.startswith(f"{variant}/{algorithm}/")]
            if own:
                row.setdefault("variants", {})[variant] = variant_row(own, curves, replay_from)
        out[algorithm] = row
    return out


def variant_row(units: list[dict], curves: dict, replay_from: int) -> dict:
    """A variant of ours (one thing changed) against both sides: its curves, and a verdict per
    curve against JaxUED's and against ours."""
    own = {metric: curve(units, metric) for metric in CURVES}
    return {
        "seeds": len(units),
        "against_jaxued": {m: verdict(own[m], curves[m]["jaxued"], replay_from) for m in CURVES},
        "against_ajax_tune": {m: verdict(own[m], curves[m]["ajax_tune"], replay_from) for m in CURVES},
        "over_seeds": {m: {k: c[k] for k in ("median", "min", "max")} for m, c in own.items()},
        "at_end": {m: last(units, m) for m in (*CURVES, *EXTRAS)},
        "timing": {k: spread(u["timing"][k] for u in units) for k in ("process_s", "compile_s", "s_per_update_replaying")},
    }


# -- --part update -----------------------------------------------------------------------------

UPDATE_EPOCHS = (1, 5)


def update_summary(runs: dict[str, list[dict]]) -> dict:
    """Per side: the median update at each epoch count, its split into a fixed part and a part
    per epoch (from the two counts), and the forward pass; the ratios ours over the peer's."""
    low, high = UPDATE_EPOCHS
    out = {}
    for side in ("ajax_tune", "jaxued"):
        at = {e: statistics.median(r["update_s"] for r in runs[f"{side}/{e}"]) for e in UPDATE_EPOCHS}
        per_epoch = (at[high] - at[low]) / (high - low)
        forward = statistics.median(r["forward_s"] for key in runs if key.startswith(side) for r in runs[key])
        out[side] = {
            "update_s": {str(e): round(v, 4) for e, v in at.items()},
            "per_epoch_s": round(per_epoch, 4),
            "fixed_s": round(at[low] - low * per_epoch, 4),
            "forward_s": round(forward, 4),
        }
    ours, peer = out["ajax_tune"], out["jaxued"]
    out["ratio_ajax_tune_over_jaxued"] = {
        key: round(ours[key] / peer[key], 2) for key in ("per_epoch_s", "fixed_s", "forward_s") if peer[key] > 0
    } | {f"update_{high}_epochs": round(ours["update_s"][str(high)] / peer["update_s"][str(high)], 2)}
    out["how_to_read"] = (
        "Seconds per call, median of 5 timed calls per process and of the processes over rounds. "
        "fixed_s is what an update costs besides its epochs; forward_s is ajax_tune's value_estimates "
        "(GAE over the values its rollout recorded, and the successors a time limit cut) against maze_plr.py's "
        "network over the unroll (what its rollout computes for them). A negative fixed_s is noise in the split."
    )
    return out
