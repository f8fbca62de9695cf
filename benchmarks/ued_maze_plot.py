"""The maze parity study's one figure: robust PLR and ACCEL (rows) by the four curves (columns),
ajax_tune beside JaxUED's maze_plr.py, each side's median over seeds with its range shaded; a
variant of ours (`ued_maze.VARIANTS`), where it ran, as a dashed median."""

from __future__ import annotations

import pathlib

from ued_maze_summary import CURVES, side_curve

TITLES = {
    "train_return": "training return (ended episodes)",
    "score_mean": "buffer mean score (MaxMC)",
    "shortest_path_mean": "shortest path, buffered levels",
    "solve_rate": "held-out solve rate (10 sampled)",
}
STYLE = {"jaxued": ("JaxUED maze_plr.py", "tab:orange"), "ajax_tune": ("ajax_tune", "tab:blue")}
VARIANT_STYLE = {"ajax_tune_terminal": ("ajax_tune, time limit ends the episode", "tab:green")}
NAMES = {"robust_plr": "robust PLR", "accel": "ACCEL"}


def draw(summary: dict, path, steps_per_update: int, replay_from: int, caption: str = "") -> pathlib.Path:
    """Write the figure to `path` (PNG). `summary` is `ued_maze_summary.summarise`'s."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    algorithms = [a for a in NAMES if a in summary and any(summary[a]["seeds"].values())]
    fig, axes = plt.subplots(len(algorithms), len(CURVES), figsize=(4.2 * len(CURVES), 3.3 * len(algorithms)), squeeze=False)
    for row, algorithm in enumerate(algorithms):
        for col, metric in enumerate(CURVES):
            ax = axes[row][col]
            for side, (label, color) in STYLE.items():
                points = side_curve(summary[algorithm], metric, side)
                if not points:
                    continue
                x = [p["update"] * steps_per_update / 1e6 for p in points]
                seeds = summary[algorithm]["seeds"][side]
                ax.plot(x, [p["median"] for p in points], color=color, label=f"{label} ({seeds} seed{'s' if seeds > 1 else ''})")
                ax.fill_between(x, [p["min"] for p in points], [p["max"] for p in points], color=color, alpha=0.2, lw=0)
            for variant, (label, color) in VARIANT_STYLE.items():
                points = side_curve(summary[algorithm], metric, variant)
                if points:
                    x = [p["update"] * steps_per_update / 1e6 for p in points]
                    seeds = summary[algorithm]["variants"][variant]["seeds"]
                    ax.plot(x, [p["median"] for p in points], color=color, ls="--", label=f"{label} ({seeds} seeds, median)")
            ax.axvline(replay_from * steps_per_update / 1e6, color="grey", ls=":", lw=1)
            verdict = summary[algorithm]["verdicts"][metric].get("verdict", "")
            ax.set_title(f"{NAMES[algorithm]}: {TITLES[metric]}\n{verdict}", fontsize=9)
            ax.grid(alpha=0.3)
            if row == len(algorithms) - 1:
                ax.set_xlabel("env steps (millions)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=len(labels), frameon=False)
    if caption:
        fig.suptitle(caption, fontsize=9)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
