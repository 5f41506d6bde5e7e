#!/usr/bin/env python3
"""Config S under each kernel and precision choice, alternated in one invocation (scripts/bench.sh --precision-table):
the CPU class's own table for docs/BENCHMARKS.md.

Rows, each run R times in turn (row 1, row 2, ..., row 1, ...), tokens/s the median of each run's logged
windows after the first, then the median of the R runs:
- "OpenBLAS's own kernels": lmtrain with OPENBLAS_CORETYPE set to what this OpenBLAS picks by itself, fp32,
  the fused set: lmtrain's defaults before it chose kernels and precision (on a CPU OpenBLAS 0.3.21 knows,
  the same kernels as the defaults);
- "defaults": lmtrain as it starts, kernels and precision chosen by itself (the log's words are printed);
- "fused fp32", "fused bf16", "reference bf16": run.kernels and run.precision set;
- "eager + autocast": the team's eager PyTorch reference of the same model under torch.autocast("cpu",
  bfloat16) on every core (scripts/bench_cpu.py), with lmtrain's kernels;
and the ratios of "defaults" to each. The CPU model and its bf16 features head the output.

Usage: scripts/bench_precision.py --lmtrain build/lmtrain [--steps 60] [--repeats 3] [--out build/bench]
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_cpu  # noqa: E402  (its lmtrain_run and reference model)


def cpu_line():
    """The CPU model and the flags that decide kernels and precision, from /proc/cpuinfo."""
    info = open("/proc/cpuinfo").read()
    model = re.search(r"^model name\s*:\s*(.*)$", info, re.M)
    family = re.search(r"^cpu family\s*:\s*(\d+)$", info, re.M)
    number = re.search(r"^model\s*:\s*(\d+)$", info, re.M)
    flags = set(re.search(r"^flags\s*:\s*(.*)$", info, re.M).group(1).split())
    wanted = ["avx2", "fma", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16"]
    return (f"{model.group(1) if model else '?'} (family {family.group(1) if family else '?'}, model "
            f"{number.group(1) if number else '?'}), {os.cpu_count()} vCPUs; flags: " +
            " ".join(f"{f}{'+' if f in flags else '-'}" for f in wanted))


def own_kernels():
    """The kernels this OpenBLAS picks by itself (a fresh process with OPENBLAS_CORETYPE unset)."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "LMTRAIN_BLAS_KERNELS")}
    code = "import ctypes; f = ctypes.CDLL('libblas.so.3').openblas_get_corename; f.restype = ctypes.c_char_p; print(f().decode())"
    return subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True).stdout.strip()


def lmtrain(args, name, kernels, precision, env_extra):
    """tokens/s of one config-S run and its log's device line."""
    saved = dict(os.environ)
    os.environ.pop("OPENBLAS_CORETYPE", None)
    os.environ.pop("LMTRAIN_BLAS_KERNELS", None)
    os.environ.update(env_extra)
    bench_cpu.PRECISION = precision
    bench_cpu.CEILING_CORE = None  # no ceiling here: the kernels differ by design
    try:
        rate, _ = bench_cpu.lmtrain_run(args.lmtrain, args.out, name, *bench_cpu.CONFIGS["S"], args.steps,
                                        os.cpu_count(), kernels=kernels)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    line = re.search(r"^.*device cpu.*$", bench_cpu.LOGS[name], re.M)
    return rate, line.group(0) if line else "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lmtrain", default="build/lmtrain")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="build/bench")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    own = own_kernels()
    chosen = bench_cpu.lmtrain_kernels(args.lmtrain)
    print(cpu_line())
    print(f"OpenBLAS alone picks {own}; lmtrain picks {chosen[0]} ({chosen[1]})" if chosen else f"OpenBLAS alone picks {own}")
    rows = [("OpenBLAS's own kernels, fused fp32", "fused", "fp32", {"OPENBLAS_CORETYPE": own}),
            ("defaults", "auto", "auto", {}),
            ("fused fp32", "fused", "fp32", {}),
            ("fused bf16", "fused", "bf16", {}),
            ("reference bf16", "reference", "bf16", {})]
    rates = {r[0]: [] for r in rows}
    rates["eager + autocast"] = []
    logs = {}
    env = dict(os.environ, OPENBLAS_CORETYPE=chosen[0] if chosen else own, **bench_cpu.MALLOC_ENV)
    for _ in range(args.repeats):
        for label, kernels, precision, extra in rows:
            rate, log = lmtrain(args, "P-" + re.sub(r"\W+", "-", label), kernels, precision, extra)
            rates[label].append(rate)
            logs[label] = log
        out = subprocess.run([sys.executable, bench_cpu.__file__, "--autocast-only", "S", "--steps", str(args.steps),
                              "--blas-threads", str(os.cpu_count())], env=env, check=True, capture_output=True, text=True)
        rates["eager + autocast"].append(json.loads(out.stdout.strip().splitlines()[-1])["tokens_per_s"])
    print(f"config S (V 8192, d 256, 4 layers, 4 heads, T 128, B 16), {args.steps} steps, {args.repeats} alternated rounds")
    base = statistics.median(rates["defaults"])
    print(f"{'row':<36} {'tokens/s':>9}  {'defaults / row':>14}  runs")
    for label, r in rates.items():
        m = statistics.median(r)
        print(f"{label:<36} {m:>9,.0f}  {base / m:>13.2f}x  {' / '.join(f'{x:,.0f}' for x in r)}")
    print("defaults' log:", logs["defaults"].split("] ", 2)[-1])


if __name__ == "__main__":
    main()
