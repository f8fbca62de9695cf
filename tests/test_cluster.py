"""A real two-node Ray cluster on loopback, with token authentication as Ray 2.x sets it up,
driven by `ajax-tune run --address`: trials run on both nodes and results come back. The
cluster is this test's own (its ports, temporary directories and token), and only the
processes it started are stopped."""

import os
import pathlib
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import psutil
import pytest
import yaml

from tests.support.helpers import corridor_config

TESTS = pathlib.Path(__file__).resolve().parent
BIN = pathlib.Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Every wait ends before pytest's per-test timeout kills the test: they share one deadline, which
# leaves this much for stopping the nodes (at most 2 x NODE_STOP_S + 15 s).
NODE_STOP_S = 30
CLEANUP_S = 2 * NODE_STOP_S + 15 + 15


def left(deadline: float) -> float:
    return max(1.0, deadline - time.monotonic())


def start_node(args, env, log: pathlib.Path, deadline: float) -> subprocess.Popen:
    """`ray start --block`: the node lives as long as this process, which stops it on SIGTERM."""
    process = subprocess.Popen(
        [BIN / "ray", "start", "--block", "--node-ip-address", "127.0.0.1", "--num-cpus", "1", "--disable-usage-stats", *args],
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    while "Ray runtime started" not in log.read_text():
        assert process.poll() is None, log.read_text()[-2000:]
        assert time.monotonic() < deadline, "ray start did not come up"
        time.sleep(0.5)
    return process


def stop_nodes(nodes):
    family = [
        (p, p.create_time())
        for node in nodes
        if node.poll() is None
        for p in [psutil.Process(node.pid), *psutil.Process(node.pid).children(recursive=True)]
    ]
    for node in nodes:
        if node.poll() is None:
            node.send_signal(signal.SIGTERM)
    for node in nodes:
        try:
            node.wait(timeout=NODE_STOP_S)
        except subprocess.TimeoutExpired:
            node.kill()
    psutil.wait_procs([p for p, _ in family if p.is_running()], timeout=15)
    for process, started in family:  # whatever ignored the shutdown, and only ours
        if process.is_running() and process.create_time() == started:
            process.kill()


@pytest.mark.slow
def test_two_nodes_on_loopback_with_a_token(tmp_path, pytestconfig):
    deadline = time.monotonic() + float(pytestconfig.getini("timeout") or 600) - CLEANUP_S
    port, token = free_port(), secrets.token_hex(32)
    temp = pathlib.Path(tempfile.mkdtemp(prefix="ajt", dir="/tmp"))  # short: Ray's socket paths are limited
    env = {
        **os.environ,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": token,
        "JAX_PLATFORMS": "cpu",
        "PYTHONPATH": os.pathsep.join([str(TESTS.parent), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("RAY_ADDRESS", None)
    nodes = []
    try:
        nodes.append(
            start_node(
                ["--head", "--port", str(port), "--temp-dir", str(temp / "head"), "--include-dashboard", "false"],
                env,
                tmp_path / "head.log",
                deadline,
            )
        )
        nodes.append(
            start_node(
                ["--address", f"127.0.0.1:{port}", "--temp-dir", str(temp / "worker")], env, tmp_path / "worker.log", deadline
            )
        )

        seen = tmp_path / "nodes"
        seen.mkdir()
        trial = corridor_config(
            lr={"grid": [1e-3, 3e-3]},
            callbacks=[{"class": "tests.support.fault_callbacks:RecordNode", "kwargs": {"directory": str(seen)}}],
        )
        config = tmp_path / "cluster.yaml"
        config.write_text(yaml.safe_dump({"name": "cluster", "trial": trial, "stop": {"training_iteration": 2}}))
        run = [
            BIN / "ajax-tune",
            "run",
            str(config),
            "--address",
            f"127.0.0.1:{port}",
            "--storage-path",
            str(tmp_path / "results"),
            "--no-plots",
        ]

        # Without the token, and with another one: one line each, saying what to set (run meanwhile).
        refused = [
            subprocess.Popen(
                [*run, "--name", name], env={**env, **change}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            for name, change in (("none", {"RAY_AUTH_MODE": "disabled"}), ("other", {"RAY_AUTH_TOKEN": "0" * 64}))
        ]
        try:
            out = subprocess.run(run, env=env, capture_output=True, text=True, timeout=left(deadline))
            for process, words in zip(refused, ("this process has no token", "refused this machine's token")):
                _, err = process.communicate(timeout=left(deadline))
                lines = [line for line in err.splitlines() if "warp" not in line]
                assert process.returncode == 2 and len(lines) == 1, err
                assert words in lines[0] and "RAY_AUTH_MODE=token" in lines[0]
        finally:
            for process in refused:
                if process.poll() is None:
                    process.kill()
        assert out.returncode == 0, out.stderr[-3000:]
        assert "Best trial:" in out.stdout
        assert len(list(seen.iterdir())) == 2  # one trial on each node (each node has one CPU)
        progress = list((tmp_path / "results" / "cluster").glob("AjaxTrainable_*/progress.csv"))
        assert len(progress) == 2 and all(len(p.read_text().splitlines()) == 3 for p in progress)
    finally:
        stop_nodes(nodes)
        shutil.rmtree(temp, ignore_errors=True)
