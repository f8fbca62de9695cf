"""What `ajax-tune run` and `resume` check and hold before Tune starts: a writable storage
path, one run per experiment directory (a re-run gets its own), resources a trial can get, and a Ray that is ours
to clear up (a local one) or that we can join (a cluster), with one-line errors for each.

Ray is imported only where a function needs it, so every check that can come before Ray starts
does.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any

from ajax_tune import compat
from ajax_tune.errors import ConfigError, LaunchError

LOCK_FILE = ".ajax-tune.lock"
AUTH_HELP = (
    "set RAY_AUTH_MODE=token and the cluster's token on this machine (in ~/.ray/auth_token, "
    "RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH; `ray get-auth-token` on the head prints it)"
)


# -- storage and the experiment lock -------------------------------------------------------------


def storage_directory(path: str | os.PathLike) -> pathlib.Path:
    """The storage path, created if needed; refused when it cannot hold an experiment."""
    text = os.fspath(path)
    if "://" in text:
        return pathlib.Path(text)  # cloud storage: Tune checks it
    directory = pathlib.Path(text).expanduser().absolute()
    existing = next(p for p in (directory, *directory.parents) if p.exists())
    if not existing.is_dir():
        where = "is" if existing == directory else f"lies under {existing}, which is"
        raise LaunchError(f"storage path {directory} {where} a file, not a directory")
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as exc:
        raise LaunchError(f"storage path {directory} is not writable ({exc.strerror or exc})") from None
    return directory


def lock_experiment(directory: pathlib.Path) -> Callable[[], None]:
    """Hold `directory` for this process: a second live run or resume of the same experiment
    would mix its files with ours. A lock whose process is gone (a killed driver) is stale and
    taken over. Returns the release function (also run at exit)."""
    if "://" in str(directory):
        return lambda: None
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / LOCK_FILE
    me = {"pid": os.getpid(), "host": socket.gethostname(), "started": _start_time(os.getpid())}
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            holder = _read_lock(path)
            if holder is not None and _alive(holder):
                raise LaunchError(
                    f"experiment {directory} is in use by another ajax-tune (pid {holder['pid']} on "
                    f"{holder['host']}); wait for it, stop it, or pass another --name"
                ) from None
            if holder is not None and holder.get("host") != me["host"]:
                raise LaunchError(
                    f"experiment {directory} is locked by pid {holder['pid']} on {holder['host']}, which this "
                    f"machine cannot check; if that run is over, delete {path}"
                ) from None
            print(
                f"note: taking over the stale lock of pid {holder['pid'] if holder else '?'} (no longer running) on {directory}",
                file=sys.stderr,
            )
            path.unlink(missing_ok=True)
            continue
        with os.fdopen(fd, "w") as f:
            json.dump(me, f)

        def release() -> None:
            if _read_lock(path) == me:
                path.unlink(missing_ok=True)

        atexit.register(release)
        return release
    raise LaunchError(f"could not lock experiment {directory}: {path} keeps reappearing")


def run_directory(storage: pathlib.Path, name: str) -> tuple[pathlib.Path, str | None]:
    """Where a new run of experiment `name` writes: `STORAGE/NAME`, or, when an earlier run's
    results are there, the first free `NAME-2`, `NAME-3`, ... so that a run's directory holds that
    run alone (its plots, its `tuner.pkl` for `resume`). Returns the directory and a note saying
    why it is not `NAME` (None when it is). A run that is alive there is refused later, by the lock."""
    first = storage / name
    if "://" in str(storage) or not _holds_a_run(first) or _locked_by_a_live_run(first):
        return first, None
    suffix = 2
    while _holds_a_run(storage / f"{name}-{suffix}"):
        suffix += 1
    chosen = storage / f"{name}-{suffix}"
    return chosen, f"note: {first} holds an earlier run (`ajax-tune resume {first}` continues it); this run writes to {chosen}"


def _holds_a_run(directory: pathlib.Path) -> bool:
    return directory.is_dir() and any(p.name != LOCK_FILE for p in directory.iterdir())


def _locked_by_a_live_run(directory: pathlib.Path) -> bool:
    holder = _read_lock(directory / LOCK_FILE)
    return holder is not None and _alive(holder)


def _read_lock(path: pathlib.Path) -> dict | None:
    try:
        holder = json.loads(path.read_text())
        return holder if isinstance(holder, dict) and isinstance(holder.get("pid"), int) else None
    except (OSError, ValueError):
        return None


def _alive(holder: dict) -> bool:
    if holder.get("host") != socket.gethostname():
        return True  # another machine's process: assume it runs
    started = _start_time(holder["pid"])
    return started is not None and (holder.get("started") is None or abs(started - holder["started"]) < 1e-3)


def _start_time(pid: int) -> float | None:
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


# -- resources -------------------------------------------------------------------------------------


def trial_resources(trial: dict) -> dict[str, float]:
    """The most CPUs and GPUs any trial of the space asks for (search spaces at their maximum)."""
    from ajax_tune.spaces import Domain

    def most(value: Any, default: float) -> float:
        if isinstance(value, Domain):
            numbers = [a for a in value.args if isinstance(a, (int, float))]
            return float(max(numbers[:2] if value.kind not in ("grid", "choice") else numbers, default=default))
        return float(default if value is None else value)

    section = trial.get("resources") or {}
    return {"CPU": most(section.get("cpu"), 1.0), "GPU": most(section.get("gpu"), 0.0)}


def local_cpus(num_cpus: int | None) -> float:
    if num_cpus:
        return float(num_cpus)
    try:
        return compat.local_ray_cpus()  # what a local Ray will offer (cgroup limits included)
    except compat.CompatError:  # gone in this Ray: the CPUs this process may use
        return float(len(os.sched_getaffinity(0)))


def check_resources(wanted: dict[str, float], nodes: list[dict[str, float]], *, local: bool) -> str | None:
    """None when some node can hold a trial; otherwise the message. On a local run it is an
    error (the trial would stay PENDING for ever), on a cluster a warning (it may grow)."""
    short = [k for k, v in wanted.items() if v > 0 and not any(n.get(k, 0.0) >= v for n in nodes)]
    if not short:
        return None
    have = ", ".join(f"{k} {max((n.get(k, 0.0) for n in nodes), default=0.0):g}" for k in short)
    ask = ", ".join(f"{k.lower()} {wanted[k]:g}" for k in short)
    if local:
        hint = " or pass --num-cpus" if "CPU" in short else ""
        raise ConfigError(
            f"trial.resources: a trial asks for {ask} but the local Ray has {have}; "
            f"lower trial.resources{hint}, or join a cluster with --address"
        )
    return (
        f"warning: a trial asks for {ask} but no node of the cluster has that many now (most: {have}); "
        f"trials wait until the cluster has a node that fits"
    )


# -- Ray -------------------------------------------------------------------------------------------

_REAPER: subprocess.Popen | None = None


def name_local_auth_mode() -> None:
    """Token authentication, named for a local Ray of our own before Ray is imported.

    It is what Ray 2.60 picks for a new local instance anyway, but then it warns about the
    choice on every run ("Token authentication is enabled ... Set RAY_AUTH_MODE=disabled to opt
    out"), an alarm on a healthy run; named explicitly, it does not. Ray reads the mode when it
    is imported, so once it is, or when the user chose a mode, nothing changes."""
    if "RAY_AUTH_MODE" not in os.environ and "ray" not in sys.modules:
        os.environ["RAY_AUTH_MODE"] = "token"


def start_local_ray(num_cpus: int | None) -> None:
    """A Ray of our own (`address="local"`: never one that `ray start` left registered on this
    machine), with a reaper that clears what Ray leaves behind if this driver is killed."""
    import ray

    global _REAPER
    if _REAPER is None:
        _REAPER = subprocess.Popen(
            [sys.executable, "-m", "ajax_tune.cli.reaper", str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    ray.init(address="local", num_cpus=num_cpus, include_dashboard=False)


def stop_local_ray() -> None:
    """Stop the local Ray of this run once its results are reported."""
    import ray

    ray.shutdown()


def join_ray(address: str) -> None:
    """Connect to a running cluster, or say in one line why not and what to set."""
    import ray

    if address != "auto" and not address.startswith("ray://"):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise LaunchError(f"--address expects HOST:PORT of a Ray head (or auto), got {address!r}")
        try:
            with socket.create_connection((host, int(port)), timeout=5):
                pass
        except OSError as exc:
            raise LaunchError(
                f"cannot reach a Ray cluster at {address} ({exc.strerror or exc}); start one there "
                f"with `ray start --head --port {port}`, or check the address"
            ) from None
    failure, text = None, ""
    with _stderr_captured() as captured:
        try:
            ray.init(address=address)
        except BaseException as exc:  # Ray raises ConnectionError, AuthenticationError, even SystemExit
            failure, text = exc, f"{exc} {captured()}"
    if failure is None:
        return
    if "InvalidAuthToken" in text or "Authentication" in type(failure).__name__ or "no authentication token" in text:
        refused = (
            "refused this machine's token"
            if os.environ.get("RAY_AUTH_MODE") == "token"
            else "uses token authentication and this process has no token"
        )
        raise LaunchError(f"the Ray cluster at {address} {refused}; {AUTH_HELP}")
    first = (str(failure).strip().splitlines() or [type(failure).__name__])[0]
    raise LaunchError(f"could not join the Ray cluster at {address}: {first}")


def cluster_nodes() -> list[dict[str, float]]:
    import ray

    return [node["Resources"] for node in ray.nodes() if node.get("Alive")]


@contextlib.contextmanager
def _stderr_captured():
    """Ray's C++ client logs connection retries straight to file descriptor 2; keep them, to
    read the reason from them, instead of printing them."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield lambda: (sink.seek(0), sink.read().decode(errors="replace"))[1]
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
