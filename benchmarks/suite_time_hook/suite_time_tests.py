"""A pytest plugin for `benchmarks/suite_time.py`: each worker writes when each test starts to
`$SUITE_TIME_DIR/tests-<pid>.jsonl`, so compile events of that process can be put to the test."""

import json
import os
import time

_log = None


def pytest_runtest_protocol(item, nextitem):
    global _log
    if _log is None:
        _log = open(os.path.join(os.environ["SUITE_TIME_DIR"], f"tests-{os.getpid()}.jsonl"), "a", buffering=1)  # noqa: SIM115
    _log.write(json.dumps({"test": item.nodeid, "t": time.time()}) + "\n")
