"""Where a compiled program spends its time, from a JAX profiler trace and XLA's HLO dump.

Standard library only, so it reads traces written by any side's JAX. The trace (perfetto JSON,
from `jax.profiler.trace(dir, create_perfetto_trace=True)`) gives each executed XLA op (a
thunk on the CPU) with its duration; the dump (`XLA_FLAGS=--xla_dump_to=DIR`) maps each op
to the Python source line it came from. Self time (an op's time less the ops nested in it) is
summed per source line and per kind of op.

    python benchmarks/peers/xla_profile.py TRACE_DIR HLO_DIR [--top 30]
"""

from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import os
import re

_INSTR = re.compile(r"^\s*(?:ROOT )?%([\w.\-]+) = .*?metadata=\{([^}]*)\}")
_FIELD = re.compile(r'(\w+)="?([^"\s]*)"?')


def op_sources(hlo_dir: str, module_substring: str = "") -> dict[str, str]:
    """Op name -> where it came from: 'file:line' where the dump has source locations, else
    JAX's op path (the nesting of scans, vmaps and named calls) without its noise."""
    out: dict[str, str] = {}
    for path in glob.glob(os.path.join(hlo_dir, "*after_optimizations.txt")):
        if module_substring not in os.path.basename(path):
            continue
        with open(path) as f:
            for line in f:
                m = _INSTR.match(line)
                if not m:
                    continue
                meta = dict(_FIELD.findall(m.group(2)))
                if "source_file" in meta:
                    out[m.group(1)] = f"{os.path.basename(meta['source_file'])}:{meta.get('source_line', '?')}"
                else:
                    path = re.sub(r"/closed_call|jit\(main\)/|^jit\([^)]*\)/", "", meta.get("op_name", "?"))
                    out[m.group(1)] = path.replace("while/body", "scan")
    return out


def self_times(trace_dir: str) -> tuple[collections.Counter, collections.Counter]:
    """Self time (microseconds) and count of every event name in the newest trace."""
    files = sorted(glob.glob(os.path.join(trace_dir, "plugins", "profile", "*", "perfetto_trace.json.gz")))
    if not files:
        raise FileNotFoundError(f"no perfetto trace under {trace_dir}")
    with gzip.open(files[-1]) as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    threads = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and "dur" in e:
            threads[(e.get("pid"), e.get("tid"))].append(e)
    self_t, count = collections.Counter(), collections.Counter()
    for es in threads.values():
        es.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack: list[dict] = []
        for e in es:
            while stack and stack[-1]["ts"] + stack[-1]["dur"] <= e["ts"]:
                stack.pop()
            if stack:
                self_t[stack[-1]["name"]] -= e["dur"]
            self_t[e["name"]] += e["dur"]
            count[e["name"]] += 1
            stack.append(e)
    return self_t, count


def report(trace_dir: str, hlo_dir: str | None = None, top: int = 30, module: str = "") -> dict:
    self_t, count = self_times(trace_dir)
    # Only XLA ops: host-side events (Python frames, the executor's own spans) are left out.
    ops = {n: t for n, t in self_t.items() if re.match(r"^(end: )?[a-z][\w\-]*(\.\d+)*$", n)}
    kinds, lines = collections.Counter(), collections.Counter()
    sources = op_sources(hlo_dir, module) if hlo_dir else {}
    for name, t in ops.items():
        base = name[len("end: ") :] if name.startswith("end: ") else name
        kinds[re.sub(r"(\.\d+)+$", "", base)] += t
        lines[sources.get(base, "?")] += t
    total = sum(ops.values()) or 1
    executor = sum(t for n, t in self_t.items() if n.startswith("ThunkExecutor::Execute") and "wait" not in n)
    return {
        "op_self_time_ms": round(total / 1e3, 3),
        "executor_overhead_ms": round(executor / 1e3, 3),
        "ops_executed": sum(count[n] for n in ops),
        "by_kind": [(k, round(t / 1e3, 3), round(t / total, 4)) for k, t in kinds.most_common(top)],
        "by_origin": [(k, round(t / 1e3, 3), round(t / total, 4)) for k, t in lines.most_common(top)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace_dir")
    parser.add_argument("hlo_dir", nargs="?")
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--module", default="", help="only HLO modules whose file name contains this")
    args = parser.parse_args()
    out = report(args.trace_dir, args.hlo_dir, args.top, args.module)
    print(
        f"op self time {out['op_self_time_ms']} ms over {out['ops_executed']} ops; "
        f"executor overhead {out['executor_overhead_ms']} ms"
    )
    for title in ("by_kind", "by_origin"):
        print(f"\n{title}:")
        for name, ms, share in out[title]:
            print(f"  {ms:10.3f} ms  {share:6.1%}  {name}")


if __name__ == "__main__":
    main()
