"""Modules the tests share and name in configs (`"tests.support.curricula:grow_corridor"`): helpers,
curricula, custom envs and agents, injected faults. Ray workers import them by that name, with the
repository root on their PYTHONPATH (tests/conftest.py puts it there)."""
