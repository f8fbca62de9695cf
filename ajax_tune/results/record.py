"""A trial's own record of its results: every iteration exactly once, in order, across failures,
restores and PBT exploits.

Tune's `progress.csv` and `result.json` are written by the driver into a staging directory and
copied to the storage path only when the experiment is synced (every 10 s or more, skipped
while a copy is still running). When a trial restarts from a checkpoint, Tune copies the storage
copy back over the staging one, so the rows logged since the last sync are lost; and the rows of
iterations a restore rewinds stay, so an iteration can appear twice. This record is written by
the trial itself, straight into its directory on the storage path, one JSON line per iteration,
flushed to disk before the result goes to Tune; a restore to iteration k drops the rows after k,
which the trial then runs again. Rows are keyed by the state's own iteration count (`iteration`,
which its checkpoint carries), so that they follow the state's lineage whatever counter Tune
restores beside it; Tune's `training_iteration` is kept in each row too.
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any

FILE_NAME = "ajax_tune_results.jsonl"


def append(directory: str | os.PathLike, iteration: int, result: dict[str, Any]) -> None:
    """Add the row of `iteration`, which follows the rows already there."""
    path = pathlib.Path(directory) / FILE_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({**result, "iteration": iteration}, sort_keys=True, default=str)  # NaN as Tune writes it
    with path.open("a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def rewind(directory: str | os.PathLike, iteration: int) -> None:
    """Keep the rows up to `iteration` (the one a restored checkpoint was saved after)."""
    path = pathlib.Path(directory) / FILE_NAME
    if not path.exists():
        return
    kept = [row for row in read(directory) if row["iteration"] <= iteration]
    partial = path.with_suffix(".partial")
    with partial.open("w") as f:
        f.writelines(json.dumps(row, sort_keys=True) + "\n" for row in kept)
        f.flush()
        os.fsync(f.fileno())
    os.replace(partial, path)


def read(directory: str | os.PathLike) -> list[dict[str, Any]]:
    """The rows, oldest first. A line cut short by a kill mid-write is not a row (the restore
    that follows the kill rewrites the file without it)."""
    path = pathlib.Path(directory) / FILE_NAME
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows
