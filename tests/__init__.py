"""The tests as a package, so that their helper modules are importable as `tests.support.*` from the
repository root, by pytest and by the Ray workers and subprocesses the tests start."""
