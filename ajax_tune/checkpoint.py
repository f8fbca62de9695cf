"""Save and restore the whole training state with orbax, plus metadata that says what it fits.

A checkpoint directory holds `state/` (orbax: every leaf of the state, in flattening order)
and `ajax_tune.json` (format version, the loop's static settings and their fingerprint, the timestep, the path, shape and
dtype of every leaf, the name and size of every state file, and whatever the caller adds, such
as curriculum state). The metadata is written last, so a directory without it is an interrupted
save; and because a checkpoint may be copied file by file in any order (Tune does so when it
moves a checkpoint to storage), the metadata present is not enough: a checkpoint is complete
only when every state file it lists is there with its size. Restoring checks all of this, and
the metadata against the loop, before orbax reads a byte, and says what differs. An offline
run's metadata names its dataset by path and content hash (`check_dataset`), never its rows.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import pathlib
import zlib
from collections.abc import Iterable
from typing import Any

import jax
import numpy as np

from ajax_tune.errors import CheckpointError
from ajax_tune.fields import fingerprint

FORMAT = "ajax_tune"
FORMAT_VERSION = 2
METADATA_FILE = "ajax_tune.json"
STATE_DIR = "state"


def _leaf_specs(state) -> list[dict]:
    leaves = jax.tree_util.tree_flatten_with_path(state)[0]
    return [
        {
            "path": jax.tree_util.keystr(path),
            "shape": list(np.shape(x)),
            "dtype": str(np.asarray(x).dtype if not hasattr(x, "dtype") else x.dtype),
        }
        for path, x in leaves
    ]


def save(directory, state, *, settings: dict, timestep: int, extra: dict | None = None) -> pathlib.Path:
    """Write `state` and its metadata; returns when everything is on disk."""
    directory = pathlib.Path(directory).absolute()
    directory.mkdir(parents=True, exist_ok=True)
    (directory / METADATA_FILE).unlink(missing_ok=True)
    leaves = jax.tree.leaves(state)
    # Orbax refuses empty arrays; their shape and dtype in the metadata are all they hold.
    stored = {f"{i:05d}": leaf for i, leaf in enumerate(leaves) if np.size(leaf)}
    with _orbax() as ocp:
        checkpointer = ocp.StandardCheckpointer()
        checkpointer.save(directory / STATE_DIR, stored, force=True)
        checkpointer.wait_until_finished()
        checkpointer.close()
    metadata = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "fingerprint": fingerprint(settings),
        "settings": _jsonable(settings),
        "timestep": int(timestep),
        "leaves": _leaf_specs(state),
        "files": _state_files(directory),
        "extra": extra or {},
    }
    # Extras that JSON cannot hold (a callback's object, say) are kept as their repr rather
    # than failing a save whose arrays are already on disk.
    (directory / METADATA_FILE).write_text(json.dumps(metadata, indent=1, default=repr))
    return directory


def read_metadata(directory) -> dict:
    directory = pathlib.Path(directory)
    if not directory.is_dir():
        raise CheckpointError(f"no checkpoint at {directory}: not a directory")
    path = directory / METADATA_FILE
    if not path.exists():
        raise CheckpointError(
            f"{directory} is not an ajax_tune checkpoint, or its save was interrupted: {METADATA_FILE} is missing"
        )
    try:
        metadata = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path} is corrupt ({exc})") from None
    if not isinstance(metadata, dict) or metadata.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not ajax_tune checkpoint metadata")
    if metadata.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(
            f"{directory} has checkpoint format version {metadata.get('format_version')}; "
            f"this ajax_tune reads version {FORMAT_VERSION}"
        )
    return metadata


def restore(directory, target, *, settings: dict) -> tuple[Any, dict]:
    """Restore into the structure of `target` (a state built by the same loop).

    Returns the restored state and the metadata. Raises `CheckpointError` naming what differs
    when the checkpoint was made by a different program, and when its files are damaged.
    """
    directory = pathlib.Path(directory).absolute()
    metadata = read_metadata(directory)
    missing = incomplete_reason(directory, metadata)
    if missing:
        raise CheckpointError(
            f"{directory} is incomplete or damaged ({missing}): an interrupted save or copy, or files changed since"
        )
    expected = _leaf_specs(target)
    if metadata["fingerprint"] != fingerprint(settings):
        saved, ours = metadata.get("settings", {}), _jsonable(settings)
        diffs = [
            f"{k}: saved {saved.get(k, '<absent>')!r}, here {ours.get(k, '<absent>')!r}"
            for k in sorted(set(saved) | set(ours))
            if saved.get(k) != ours.get(k)
        ]
        raise CheckpointError(f"{directory} was saved with different settings: " + ("; ".join(diffs) or "fingerprints differ"))
    if metadata["leaves"] != expected:
        raise CheckpointError(f"{directory} does not fit this state: {_describe_difference(metadata['leaves'], expected)}")
    leaves, treedef = jax.tree.flatten(target)
    abstract = {f"{i:05d}": jax.ShapeDtypeStruct(np.shape(leaf), leaf.dtype) for i, leaf in enumerate(leaves) if np.size(leaf)}
    with _orbax() as ocp:
        checkpointer = ocp.StandardCheckpointer()
        try:
            restored = checkpointer.restore(directory / STATE_DIR, abstract)
        except Exception as exc:  # orbax raises many kinds for damaged files
            reason = (str(exc).strip().splitlines() or [""])[0][:200]
            raise CheckpointError(
                f"{directory} could not be read; its files are damaged ({type(exc).__name__}: {reason})"
            ) from None
        finally:
            # Closed on failure too: an orbax checkpointer left open reports its own errors later,
            # from a closed event loop, after ours.
            checkpointer.close()
    values = [restored[f"{i:05d}"] if np.size(leaf) else np.zeros(np.shape(leaf), leaf.dtype) for i, leaf in enumerate(leaves)]
    return jax.tree.unflatten(treedef, values), metadata


def incomplete_reason(directory, metadata: dict | None = None) -> str | None:
    """Why `directory` is not a whole checkpoint (metadata missing or unreadable, a state file
    it lists missing or of another size), or None when it is whole."""
    directory = pathlib.Path(directory)
    if metadata is None:
        if not (directory / METADATA_FILE).is_file():
            return f"{METADATA_FILE} is missing"
        try:
            metadata = read_metadata(directory)
        except CheckpointError:
            return f"{METADATA_FILE} is unreadable"
    files = metadata.get("files")
    if files is None:  # written before file lists existed: only the metadata can vouch for it
        return None if (directory / STATE_DIR).is_dir() else f"{STATE_DIR}/ is missing"
    for name, size in files.items():
        path = directory / STATE_DIR / name
        if not path.is_file():
            return f"{STATE_DIR}/{name} is missing"
        if path.stat().st_size != size:
            return f"{STATE_DIR}/{name} has {path.stat().st_size} bytes of {size}"
    return None


def newest_complete(candidates: Iterable) -> tuple[pathlib.Path | None, list[tuple[pathlib.Path, str]]]:
    """The last complete checkpoint of `candidates` (ordered oldest first), and the newer ones
    skipped on the way with the reason each is incomplete."""
    skipped = []
    for candidate in reversed([pathlib.Path(c) for c in candidates]):
        reason = incomplete_reason(candidate)
        if reason is None:
            return candidate, skipped
        skipped.append((candidate, reason))
    return None, skipped


def sorted_checkpoints(directory) -> list[pathlib.Path]:
    """The `checkpoint_*` subdirectories of a trial directory, oldest first (by their index)."""
    return sorted((p for p in pathlib.Path(directory).glob("checkpoint_*") if p.is_dir()), key=lambda p: p.name)


def find_complete(path) -> tuple[pathlib.Path, str | None]:
    """The checkpoint to use for `path` and a note when it is not `path` itself.

    A complete checkpoint is used as it is. An incomplete one gives way to the newest complete
    checkpoint saved before it beside it (in the same trial directory); a trial directory gives
    its newest complete checkpoint. Raises `CheckpointError` when there is none.
    """
    path = pathlib.Path(path)
    if not path.is_dir():
        raise CheckpointError(f"no checkpoint at {path}: not a directory")
    own = sorted_checkpoints(path)
    if own and not (path / METADATA_FILE).exists():
        chosen, skipped = newest_complete(own)
        if chosen is None:
            raise CheckpointError(f"{path} has no complete checkpoint ({len(skipped)} incomplete)")
        note = f"{len(skipped)} newer incomplete checkpoint(s) skipped" if skipped else None
        return chosen, (f"note: using {chosen.name}, the newest complete checkpoint in {path}" + (f" ({note})" if note else ""))
    reason = incomplete_reason(path)
    if reason is None:
        return path, None
    if not path.name.startswith("checkpoint_"):
        read_metadata(path)  # the clearest error for a directory that is no checkpoint at all
        raise CheckpointError(f"{path} is incomplete or damaged ({reason})")
    earlier = [p for p in sorted_checkpoints(path.parent) if p.name < path.name]
    chosen, _ = newest_complete(earlier)
    if chosen is None:
        raise CheckpointError(f"{path} is incomplete ({reason}) and no complete checkpoint precedes it")
    return chosen, f"note: {path.name} is incomplete ({reason}); using {chosen.name}, the newest complete one before it"


def nonfinite_leaves(tree, limit: int = 3) -> list[str]:
    """Paths of the first floating-point leaves of `tree` holding NaN or infinity (on the host)."""
    bad = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(jax.device_get(tree))[0]:
        leaf = np.asarray(leaf)
        if np.issubdtype(leaf.dtype, np.inexact) and not np.isfinite(leaf).all():
            bad.append(jax.tree_util.keystr(path))
            if len(bad) == limit:
                break
    return bad


def refuse_nonfinite(directory, tree) -> None:
    """A checkpoint whose agent holds a non-finite number is of a run that had diverged."""
    bad = nonfinite_leaves(tree)
    if bad:
        raise CheckpointError(
            f"{directory} holds a non-finite state ({', '.join(bad)}): its run had diverged; use an earlier checkpoint"
        )


def trial_salt(trial_id: str) -> int:
    """What a trial folds into the random streams of a state it takes from another trial (a PBT
    exploit): its own, stable across restarts of that trial."""
    return zlib.crc32(trial_id.encode()) & 0x7FFFFFFF


def _state_files(directory: pathlib.Path) -> dict[str, int]:
    root = directory / STATE_DIR
    return {str(p.relative_to(root)): p.stat().st_size for p in sorted(root.rglob("*")) if p.is_file()}


def _jsonable(settings: dict) -> dict:
    return json.loads(json.dumps(settings, default=repr))


def _describe_difference(saved: list[dict], expected: list[dict]) -> str:
    saved_by_path = {leaf["path"]: leaf for leaf in saved}
    expected_by_path = {leaf["path"]: leaf for leaf in expected}
    missing = [p for p in expected_by_path if p not in saved_by_path]
    extra = [p for p in saved_by_path if p not in expected_by_path]
    changed = [
        f"{p} saved as {saved_by_path[p]['shape']} {saved_by_path[p]['dtype']}, expected "
        f"{expected_by_path[p]['shape']} {expected_by_path[p]['dtype']}"
        for p in expected_by_path
        if p in saved_by_path and saved_by_path[p] != expected_by_path[p]
    ]
    parts = []
    if changed:
        parts.append("; ".join(changed[:3]) + (f" (and {len(changed) - 3} more)" if len(changed) > 3 else ""))
    if missing:
        parts.append(f"missing {missing[:3]}")
    if extra:
        parts.append(f"unexpected {extra[:3]}")
    return "; ".join(parts) or "the static settings (fingerprint) differ although every array has the same shape"


@contextlib.contextmanager
def _orbax():
    """Orbax, imported when a checkpoint is first written or read: it takes most of a second
    to import, which every trial process and `ajax-tune run` would otherwise pay before their
    first result, checkpoint or not. Importing it and its logging (absl's) give Python's root
    logger a stderr handler where it has none; the root logger is the user's, so a handler
    added meanwhile is taken off again."""
    handlers = list(logging.root.handlers)
    try:
        import orbax.checkpoint as ocp

        yield ocp
    finally:
        for handler in [h for h in logging.root.handlers if h not in handlers]:
            logging.root.removeHandler(handler)


def check_dataset(directory, metadata: dict, current: dict) -> None:
    """An offline checkpoint learned from the dataset its metadata names by content hash: a
    dataset that hashes otherwise now (changed since, or another one) is refused."""
    saved = (metadata.get("extra") or {}).get("dataset")
    if not saved:
        raise CheckpointError(f"{directory} records no dataset: it was not written by an offline run")
    if saved.get("hash") != current.get("hash"):
        raise CheckpointError(
            f"{directory} learned from dataset {saved.get('path') or '?'} with content hash {str(saved.get('hash'))[:12]}; "
            f"the dataset {current.get('path') or '?'} hashes to {str(current.get('hash'))[:12]} now: it changed since the "
            "checkpoint was written (use the dataset it learned from, or start a new run)"
        )


@dataclasses.dataclass
class TrialRecord:
    """What a `Runner` keeps in a checkpoint's metadata (`extra`) beside its state: the config as
    given, where the run stands, every member's curriculum (one entry per member, in member order,
    a trial of one config included), PBT's lineage and a pruned population's survivors.

    Checkpoints written before every member's curriculum was listed kept one at the top level: a
    trial of one config its own, and a population the one every member started from; `from_extra`
    reads it as `shared_curriculum`, each member's."""

    config: dict | None = None
    trial_id: str = ""
    iteration: int = 0
    best_member: int = 0
    curricula: list[dict] | None = None
    shared_curriculum: dict | None = None
    pbt: dict | None = None
    survivors: list[int] | None = None  # kept only for a population with prune
    rungs: int = 0
    result: dict = dataclasses.field(default_factory=dict)  # the last one reported (plain values)

    def to_extra(self) -> dict:
        return {
            "trial_id": self.trial_id,
            "iteration": self.iteration,
            "best_member": self.best_member,
            "curricula": self.curricula or [],
            **({"pbt": self.pbt} if self.pbt is not None else {}),
            **({"prune": {"survivors": list(self.survivors), "rungs": self.rungs}} if self.survivors is not None else {}),
            "config": self.config,
            "result": {k: v for k, v in self.result.items() if isinstance(v, (int, float, str, bool))},
        }

    @classmethod
    def from_extra(cls, extra: dict) -> TrialRecord:
        prune = extra.get("prune") or {}
        shared = None
        if "curricula" not in extra:  # the layout before every member was listed
            shared = {"callbacks": extra.get("callbacks", []), "sampler": extra.get("sampler")}
        return cls(
            config=extra.get("config"),
            trial_id=extra.get("trial_id", ""),
            iteration=int(extra.get("iteration", 0)),
            best_member=int(extra.get("best_member", 0)),
            curricula=extra.get("curricula"),
            shared_curriculum=shared,
            pbt=extra.get("pbt"),
            survivors=prune.get("survivors"),
            rungs=int(prune.get("rungs", 0)),
            result=dict(extra.get("result") or {}),
        )

    @classmethod
    def read(cls, directory) -> TrialRecord:
        return cls.from_extra(read_metadata(directory).get("extra", {}))

    def member_curricula(self, count: int) -> list[dict]:
        """The curriculum state of each of `count` members."""
        if self.curricula is None:
            return [self.shared_curriculum or {"callbacks": [], "sampler": None}] * count
        return self.curricula
