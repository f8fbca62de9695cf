"""The machine's matrix-product rate in JAX: what bounds an agent whose time is its products.

Times a chain of `CHAIN` products `x <- (a @ x) / sqrt(n)` of square float32 matrices in one
compiled program (so Python's dispatch is not counted), for a few sizes, and writes the GFLOP/s
(median and best of repeated calls). SAC's and TD3's 256-wide networks run products of 256 x 256 x 256, so
the first row is the rate an agent of that size can reach at best on this machine.

    python benchmarks/matmul_peak.py
"""

from __future__ import annotations

import argparse
import statistics
import time

import harness

CHAIN = 16


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[256, 1024, 2048])
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--quick", action="store_true", help="256 only, 5 calls")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    sizes, calls = ([256], 5) if args.quick else (args.sizes, args.calls)

    import jax

    rows = []
    for n in sizes:
        a, b = jax.random.normal(jax.random.key(0), (n, n)), jax.random.normal(jax.random.key(1), (n, n))
        scale = 1.0 / float(n) ** 0.5
        product = jax.jit(lambda a, b, scale=scale: jax.lax.fori_loop(0, CHAIN, lambda _, x: (a @ x) * scale, b))
        product(a, b).block_until_ready()
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            product(a, b).block_until_ready()
            times.append(time.perf_counter() - start)
        flops = 2.0 * n**3 * CHAIN
        rows.append({"n": n, "gflops_median": flops / statistics.median(times) / 1e9, "gflops_best": flops / min(times) / 1e9})
        print(f"{n:5d} x {n}: {rows[-1]['gflops_median']:6.0f} GFLOP/s median, {rows[-1]['gflops_best']:6.0f} best")
    print(f"device: {jax.devices()[0]}")
    harness.write_results("matmul_peak_quick" if args.quick else "matmul_peak", {"calls": calls, "rows": rows}, args.out)


if __name__ == "__main__":
    main()
