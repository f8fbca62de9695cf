"""Ray's start and stop around a Tune run: Ray's defaults against ajax_tune's local Ray.

Each run is a fresh process (`peers/ray_start.py`) that starts a local Ray, runs one Tune trial
of a trainable that does nothing for one iteration, and stops Ray; the two sides alternate
(A B B A ...). `ray_default`: `ray.init` as is (Ray prestarts one idle worker per CPU for the
first driver and waits for them) and `ray.shutdown()`. `ajax_tune`: what `ajax-tune run` does,
`compat.LOCAL_RAY_SYSTEM_CONFIG` (no prestarted workers: Tune gives every trial actor a runtime
env, so a trial never runs in one), `compat.without_idle_head_processes()` (no API server or
autoscaler monitor on the head) and `compat.stop_local_ray_at_once()`; `ajax_tune_with_head`
(`--sides`) is that with the two head processes left in. Times are from the
worker's start: Ray's start, the trial's first result, the fit, Ray's stop.

    python benchmarks/ray_start.py               # 5 rounds, 2 CPUs
    python benchmarks/ray_start.py --quick       # 2 rounds
"""

from __future__ import annotations

import argparse
import sys

import harness

KEYS = ("import_s", "ray_start_s", "first_result_s", "fit_s", "stop_s", "total_s", "prestarted_workers")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--num-cpus", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="2 rounds")
    parser.add_argument("--out", default=None)
    parser.add_argument(
        "--sides",
        nargs="+",
        default=["ray_default", "ajax_tune"],
        choices=["ray_default", "ajax_tune", "ajax_tune_with_head"],
        help="ajax_tune_with_head: ours with the head's API server and autoscaler monitor left in",
    )
    args = parser.parse_args(argv)
    repeats = 2 if args.quick else args.repeats
    sides = {name: (sys.executable, "ray_start.py", {"side": name, "num_cpus": args.num_cpus}) for name in args.sides}
    runs = harness.alternate(
        sides, repeats, log=lambda line: print(line, file=sys.stderr, flush=True), extra_env={"RAY_AUTH_MODE": "token"}
    )
    summary = {name: harness.medians(r, KEYS) for name, r in runs.items()}
    for name, r in runs.items():
        summary[name]["trial_in_a_prestarted_worker"] = sum(bool(x["trial_in_a_prestarted_worker"]) for x in r)
    print(f"{'seconds (median of ' + str(repeats) + ')':28s}" + "".join(f" {name:>20s}" for name in sides))
    for key in KEYS:
        print(f"{key:28s}" + "".join(f" {summary[name][key]['median']:20.2f}" for name in sides))
    for name in sides:
        print(f"{name}: trials run in a prestarted worker: {summary[name]['trial_in_a_prestarted_worker']} of {repeats}")
    name = "ray_start_quick" if args.quick else "ray_start"
    harness.write_results(name, {"repeats": repeats, "num_cpus": args.num_cpus, "summary": summary, "runs": runs}, args.out)


if __name__ == "__main__":
    main()
