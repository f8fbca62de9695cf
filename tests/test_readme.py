"""The README's own examples, run as a reader would copy them, and the links the docs give.

The README is what a new user runs first, so its Python examples are taken from the README
itself rather than kept in a copy that could drift. They are written with a reader's budgets;
here each runs with the smaller ones of `SMALL` (regex substitutions applied to every example), so
that each takes a few tens of seconds on 2 CPUs. Every substitution must apply to some example,
and every example that trains must be reduced by one, so a README edit that slips past the table
fails here instead of running at full size.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pathlib
import re

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))

# The budgets the README's examples run with here: (pattern, replacement).
SMALL = (
    (r'"timesteps_per_iteration": [\d_]+', '"timesteps_per_iteration": 2_048'),  # whole unrolls of every example's agent
    (r'"num_seeds": \d+', '"num_seeds": 1'),
    (r"num_samples=\d+", "num_samples=2"),
    (r'"training_iteration": \d+', '"training_iteration": 2'),
    (r"max_t=\d+, grace_period=\d+", "max_t=2, grace_period=1"),
    (r"perturbation_interval=\d+", "perturbation_interval=1"),
    (r"for _ in range\(\d+\)", "for _ in range(2)"),
)
UNREADABLE = set("{}'\"")  # what a trial's name or directory must not hold


def fenced_blocks(text: str, language: str) -> list[tuple[str, str]]:
    """(the heading above it, the code) of every ```language block, in order."""
    blocks, heading = [], ""
    for match in re.finditer(rf"^(#+ [^\n]*)$|^```{language}\n(.*?)^```$", text, re.M | re.S):
        if match.group(1):
            heading = match.group(1).lstrip("#").strip()
        else:
            blocks.append((heading, match.group(2)))
    return blocks


def reduced(code: str) -> tuple[str, int]:
    count = 0
    for pattern, replacement in SMALL:
        code, n = re.subn(pattern, replacement, code)
        count += n
    return code, count


EXAMPLES = fenced_blocks(README.read_text(), "python")
IDS = [f"{i}-" + "-".join(re.findall(r"[a-z_]*[a-z]", heading.lower())[:3]) for i, (heading, _) in enumerate(EXAMPLES)]


@functools.cache
def run_example(index: int, workdir: str):
    """Executes one README example in a fresh namespace, in `workdir`, with Tune's results
    stored there too. Returns the namespace, or the exception it raised (cached either way, so
    the name checks below reuse the run)."""
    code, _ = reduced(EXAMPLES[index][1])
    namespace = {"__name__": f"readme_example_{index}"}  # not importable: cloudpickle sends its functions by value
    before = os.environ.get("RAY_STORAGE")
    os.environ["RAY_STORAGE"] = str(pathlib.Path(workdir) / "ray_results")  # RunConfig's default storage_path
    try:
        with contextlib.chdir(workdir):
            exec(compile(code, f"README.md example {index}", "exec"), namespace)
        return namespace
    except Exception as exc:  # noqa: BLE001 - handed to the test that reports it
        return exc
    finally:
        if before is None:
            os.environ.pop("RAY_STORAGE", None)
        else:
            os.environ["RAY_STORAGE"] = before


@pytest.fixture(scope="module")
def workdirs(tmp_path_factory):
    return {i: str(tmp_path_factory.mktemp(f"readme{i}")) for i in range(len(EXAMPLES))}


def ran(index, workdirs):
    outcome = run_example(index, workdirs[index])
    if isinstance(outcome, Exception):
        raise AssertionError(f"README example {IDS[index]} raised {type(outcome).__name__}: {outcome}") from outcome
    return outcome


def test_readme_has_an_example_per_workflow_and_every_one_is_reduced():
    text = README.read_text()
    for needed in ("Tuner(", "env_task_fn", "PopulationBasedTraining", "Runner("):
        assert any(needed in code for _, code in EXAMPLES), f"no README example uses {needed}"
    for (_, code), name in zip(EXAMPLES, IDS):
        trains = "Tuner(" in code or ".train()" in code
        assert not trains or reduced(code)[1] > 0, f"README example {name} trains but no SMALL substitution applies"
    for pattern, _ in SMALL:
        assert re.search(pattern, text), f"SMALL's {pattern!r} matches no README example: drop it or fix the README"


@pytest.mark.filterwarnings("ignore:The `RAY_STORAGE` environment variable is deprecated")
@pytest.mark.parametrize("index", range(len(EXAMPLES)), ids=IDS)
def test_readme_example_runs(ray_session, workdirs, index):
    namespace = ran(index, workdirs)
    results = namespace.get("results")
    if results is not None:  # a Tune example: every trial ended well
        assert len(results) >= 1
        assert results.num_errors == 0, [str(e) for e in results.errors]
        assert results.num_terminated == len(results)
        for result in results:
            assert result.metrics["training_iteration"] >= 1 and result.metrics["env_steps"] > 0
            assert result.metrics["perf/compilations"] == 1
    else:  # a Runner example: it trained and wrote what it says it writes
        result = namespace["result"]
        assert result["env_steps"] == 2 * 2_048
        for path in re.findall(r'save\("([^"]+)"\)', EXAMPLES[index][1]):
            assert (pathlib.Path(workdirs[index]) / path).is_dir(), path


@pytest.mark.learning  # the claim under the README's levels example, in the build users run
def test_the_levels_example_learns_as_the_readme_says():
    """The README's levels example, run at its own budget (8 calls of 32,768 env steps): what it
    prints each call is recorded. ACCEL takes gradient steps (its replays) from the first call on,
    and success on the 100 held-out mazes goes from its untrained level (the start evaluation) to
    at least 0.45 and 0.3 above it. Measured in the users' build (one seed, 2026-12-06): 0.128
    untrained, then 0.209, 0.346, 0.441, 0.478, 0.515, 0.538, 0.549, 0.564; 31 s with a cold cache."""
    ((index, (_, code)),) = [(i, block) for i, block in enumerate(EXAMPLES) if '"algorithm": "accel"' in block[1]]
    printed, results = [], []

    def record(*values):  # what the example prints, and the result it prints it from
        printed.append(values)
        results.append(namespace["result"])

    namespace = {"__name__": "readme_levels_example", "print": record}
    exec(compile(code, f"README.md example {index}", "exec"), namespace)
    result = namespace["result"]
    start = results[0]["eval/start/heldout/success_rate_mean"]  # the untrained policy, in the first call
    curve = [round(float(row[3]), 3) for row in printed]
    message = f"held-out success {start:.3f} untrained, then {curve}; agent updates {[row[2] for row in printed]}"
    print(message)
    assert len(printed) == 8 and result["env_steps"] == 8 * 32_768
    assert all(row[2] > 0 for row in printed), message  # gradient steps in every call: replay from the start
    assert start < 0.2 and curve[-1] >= 0.45 and curve[-1] - start >= 0.3, message
    assert result["perf/compilations"] == 1


@pytest.mark.parametrize(
    "index",
    [i for i, (_, code) in enumerate(EXAMPLES) if "Tuner(" in code],
    ids=[n for n, (_, code) in zip(IDS, EXAMPLES) if "Tuner(" in code],
)
def test_readme_example_trials_have_readable_names(ray_session, workdirs, index):
    from ray import tune

    results = ran(index, workdirs)["results"]
    names = [str(trial) for trial in tune.ExperimentAnalysis(results.experiment_path).trials]
    dirs = [pathlib.Path(result.path).name for result in results]
    assert names and dirs
    unreadable = [n for n in names + dirs if UNREADABLE & set(n)]
    assert not unreadable, f"trial or directory names with braces or quotes: {unreadable}"


# -- the docs' own references (fast) ------------------------------------------------------------------


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: p.name)
def test_every_link_and_named_file_exists(doc):
    text = doc.read_text()
    missing = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.exists():
            missing.append(target)
        elif anchor and file.suffix == ".md":
            anchors = {slug(h) for h in re.findall(r"^#+ (.*)$", file.read_text(), re.M)}
            if anchor not in anchors:
                missing.append(target)
    for path in re.findall(r"(?<![\w/.~])((?:configs|examples|benchmarks|tests|docs)/[\w./-]*\w)", text):
        if not (ROOT / path).exists():
            missing.append(path)
    assert not missing, f"{doc.name} points at what is not there: {sorted(set(missing))}"


def test_readme_quick_start_is_the_shipped_config():
    """The README says the quick start trains two learning rates side by side, two seeds each."""
    quick = yaml.safe_load((ROOT / "configs" / "quickstart.yaml").read_text())["trial"]
    assert "ajax-tune run configs/quickstart.yaml" in README.read_text()
    assert len(quick["agent"]["lr"]["grid"]) == 2 and quick["train"]["num_seeds"] == 2


def test_readme_yaml_forms_are_what_the_shipped_configs_hold():
    trials = [yaml.safe_load(p.read_text())["trial"] for p in sorted((ROOT / "configs").glob("*.yaml"))]
    for heading, block in fenced_blocks(README.read_text(), "yaml"):
        shown = yaml.safe_load(block)
        assert any(all(t.get(k) == v for k, v in shown.items()) for t in trials), (
            f"the YAML under {heading!r} is in no configs/*.yaml trial: {shown}"
        )
