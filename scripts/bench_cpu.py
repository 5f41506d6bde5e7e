#!/usr/bin/env python3
"""CPU training benchmark (scripts/bench.sh): the matrix-product ceiling, lmtrain's training step, and the
team's own tuned PyTorch eager reference of the same model and optimizer, in one invocation.

- Ceiling: the best of 6 fp32 2048x2048 matrix products through the same LibTorch and OpenBLAS (Debian's
  python3-torch is the same LibTorch 1.13), for 1 and 2 OpenBLAS threads, and the same product as row blocks
  on 2 threads each calling single-threaded OpenBLAS (lmtrain's fused kernels' way), measured at the start
  and again (the 2-thread figures) right before every lmtrain run; "of ceiling" divides by the best 2-thread
  figure of all of them, so a slow minute at the start cannot flatter lmtrain. The table is printed at the end.
- lmtrain: `lmtrain train` on the KJV split (data/kjv) with its default run.kernels fused (the products split
  over --blas-threads LibTorch threads, OpenBLAS single-threaded per block), and config S once more with
  run.kernels plain (1 LibTorch thread, --blas-threads OpenBLAS threads: the path before the fused kernels);
  tokens/s is the median of the logged windows after the first (warm-up); peak RSS from wait4.
- Reference: pre-LN GPT with fused qkv, learned positions, erf GELU, tied head (lmtrain's model contract),
  AdamW (foreach) with lmtrain's decay groups and clipping, the loss in chunks of 256 positions through the
  tied head (as lmtrain), glibc malloc told to keep freed memory (lmtrain's mallopt settings, through
  MALLOC_*_ environment variables), 1 LibTorch thread and OPENBLAS_NUM_THREADS = --blas-threads (eager
  PyTorch's fastest split here: 2 LibTorch threads beside OpenBLAS's 2 fight for the cores; note that
  torch.set_num_threads does not reach OpenBLAS's pool), random ids (speed does not depend on the values).
  Each reference runs in its own process so its peak RSS is its own.
- OpenBLAS kernels: the Python processes run the kernels lmtrain chooses here (its `--version` line names
  them: the user's OPENBLAS_CORETYPE, or the widest this CPU runs where OpenBLAS would pick narrower ones), and
  each lmtrain run's log must name the kernels the ceiling ran, so the fraction never compares different
  kernels.
- bf16 ceiling: the best of 6 bf16 2048x2048 products through LibTorch's bf16 mm (oneDNN: AMX or AVX512-BF16
  where the CPU has them), and config S's product shapes, on --blas-threads LibTorch threads; a run whose log
  says `precision bf16` is measured against it, an fp32 run against the fp32 ceiling.
- Reference under autocast: the same reference model under torch.autocast("cpu", dtype=torch.bfloat16) with
  --blas-threads LibTorch threads (oneDNN's bf16 products run on LibTorch's pool), config S only: what a
  PyTorch user gets with one line.
- Model FLOPs per token: 6 x (parameters except positions) + 12 x L x C x T (attention scores and values).

- --repeats R: each config's lmtrain and reference runs alternate R times (lmtrain, reference, lmtrain, ...)
  and the table shows the medians (peak RSS: the largest), with every run's figure on the next line; the
  machine's speed drifts by 10-30% from minute to minute, and alternating keeps the drift on both sides.

Usage: scripts/bench_cpu.py --lmtrain build/lmtrain [--steps 60] [--out build/bench] [--blas-threads N]
       [--repeats R] [--precision auto|fp32|bf16]
"""
import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time

CONFIGS = {  # name: (V, C, L, H, T, B)
    "S": (8192, 256, 4, 4, 128, 16),
    "V-small": (1024, 256, 4, 4, 128, 16),
    "T-long": (8192, 256, 4, 4, 512, 4),
}
CEILING_CORE = None  # the OpenBLAS kernels the ceiling ran (every lmtrain run must report the same)
S_SHAPES = [(2048, 256, 768), (2048, 256, 256), (2048, 256, 1024), (2048, 1024, 256), (2048, 256, 8192)]

MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30),
              "MALLOC_TOP_PAD_": str(64 << 20)}


def model_flops_per_token(V, C, L, H, T):
    per_block = 3 * C * C + 3 * C + C * C + C + 4 * C * C + 4 * C + 4 * C * C + C + 4 * C  # qkv, proj, fc, out, 2 LN
    params = V * C + L * per_block + 2 * C  # token table (tied head) + blocks + final LN; positions excluded
    return 6 * params + 12 * L * C * T


def ceiling(threads, split=False):
    """Best of 6 products. split: `threads` Python threads each multiply a block of rows with a
    single-threaded OpenBLAS (the caller sets OPENBLAS_NUM_THREADS=1), lmtrain's fused kernels' way."""
    import threading
    import torch
    torch.set_num_threads(1 if split else threads)
    a, b, c = torch.randn(2048, 2048), torch.randn(2048, 2048), torch.empty(2048, 2048)
    rows = 2048 // threads

    def block(i):
        torch.mm(a[i * rows:(i + 1) * rows], b, out=c[i * rows:(i + 1) * rows])
    best = 0.0
    for _ in range(6):
        t0 = time.perf_counter()
        if split:
            workers = [threading.Thread(target=block, args=(i,)) for i in range(threads)]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
        else:
            torch.mm(a, b, out=c)
        best = max(best, 2 * 2048 ** 3 / (time.perf_counter() - t0) / 1e9)
    return best


def bf16_ceiling(threads, shape=(2048, 2048, 2048)):
    """Best of 6 bf16 products (M,K) @ (K,N) through LibTorch's bf16 mm (oneDNN) on `threads` threads."""
    import torch
    torch.set_num_threads(threads)
    M, K, N = shape
    a, b = torch.randn(M, K).bfloat16(), torch.randn(K, N).bfloat16()
    torch.mm(a, b)
    best = 0.0
    for _ in range(6):
        t0 = time.perf_counter()
        torch.mm(a, b)
        best = max(best, 2 * M * K * N / (time.perf_counter() - t0) / 1e9)
    return best


def lmtrain_kernels(exe):
    """The OpenBLAS kernels lmtrain chooses on this machine (the `OpenBLAS kernels:` line of --version), or None."""
    out = subprocess.run([exe, "--version"], check=True, capture_output=True, text=True).stdout
    m = re.search(r"^OpenBLAS kernels: (\S+) \((.*)\)$", out, re.M)
    return (m.group(1), m.group(2)) if m else None


def blas_core_name():
    """The kernels the OpenBLAS loaded with torch runs (openblas_get_corename), or "?" when it cannot say
    (then the lmtrain runs' kernels are not checked against it)."""
    import ctypes
    try:
        fn = ctypes.CDLL("libblas.so.3").openblas_get_corename
    except (OSError, AttributeError):
        return "?"
    fn.restype = ctypes.c_char_p
    return fn().decode()


def measure_ceiling(blas, only=None):
    """The ceiling, each figure in a fresh process (OpenBLAS sizes its pool from OPENBLAS_NUM_THREADS at load):
    ({threads: GFLOP/s} for 1, 2 and `blas` threads (or `only`), the `blas` single-threaded row blocks or None)."""
    global CEILING_CORE
    ceil = {}
    for t in [only] if only else sorted({1, 2, blas}):
        out, _ = run_measured([sys.executable, __file__, "--ceiling-only", str(t)],
                              dict(os.environ, OPENBLAS_NUM_THREADS=str(t)))
        ceil[t] = float(out.strip().splitlines()[-1])
        CEILING_CORE = out.strip().splitlines()[-2]
    split = None
    if blas > 1:  # the same product as `blas` single-threaded OpenBLAS calls on row blocks, one per thread
        out, _ = run_measured([sys.executable, __file__, "--ceiling-only", str(blas), "--split"],
                              dict(os.environ, OPENBLAS_NUM_THREADS="1"))
        split = float(out.strip().splitlines()[-1])
    return ceil, split


def reference(V, C, L, H, T, B, steps, autocast_threads=0):
    """tokens/s of the eager reference; autocast_threads > 0: under bf16 autocast on that many LibTorch threads."""
    import contextlib
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    torch.set_num_threads(autocast_threads or 1)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
            self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            self.fc, self.out = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

        def forward(self, x):
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
            q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) / math.sqrt(C // H)
            att = att.masked_fill(mask, float("-inf")).softmax(-1)
            y = (att @ v).transpose(1, 2).reshape(B, T, C)
            x = x + self.proj(y)
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    torch.manual_seed(0)
    emb, pos = nn.Embedding(V, C), nn.Embedding(T, C)
    blocks = nn.ModuleList(Block() for _ in range(L))
    ln_f = nn.LayerNorm(C)
    model = nn.ModuleList([emb, pos, blocks, ln_f])
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and not n.startswith(("0.", "1."))]
    other = [p for n, p in model.named_parameters() if not (p.dim() == 2 and not n.startswith(("0.", "1.")))]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), foreach=True)
    x, y = torch.randint(V, (B, T)), torch.randint(V, (B, T))

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16) if autocast_threads else contextlib.nullcontext():
            return step_in()

    def step_in():
        h = emb(x) + pos.weight[:T]
        for b in blocks:
            h = b(h)
        h = ln_f(h).reshape(-1, C)
        yy = y.reshape(-1)
        loss = sum(F.cross_entropy(F.linear(h[i:i + 256], emb.weight), yy[i:i + 256], reduction="sum")
                   for i in range(0, B * T, 256)) / (B * T)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(5):
        step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    window = max(len(times) // 6, 1)  # medians of windows, like lmtrain's logged windows
    rates = [B * T * window / sum(times[i:i + window]) for i in range(0, len(times) - window + 1, window)]
    return statistics.median(rates)


def run_measured(cmd, env=None):
    """Runs cmd; returns (stdout, peak RSS MiB) from wait4."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    out = p.stdout.read()
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed ({p.returncode}): {out[-2000:]}")
    return out, usage.ru_maxrss / 1024


def lmtrain_run(exe, out, name, V, C, L, H, T, B, steps, blas, optimizer="adamw", kernels="fused"):
    run_dir = os.path.join(out, name)
    sets = {"run.dir": run_dir, "run.threads": 1, "run.blas_threads": blas, "run.kernels": kernels,
            "run.precision": PRECISION, "tokenizer.vocab_size": V, "model.d_model": C,
            "model.n_layers": L, "model.n_heads": H, "model.max_seq_len": T, "train.batch_size": B,
            "train.max_steps": steps, "train.warmup_steps": 10, "train.eval_every": 0, "train.optimizer": optimizer,
            "train.log_every": max(steps // 6, 1), "checkpoint.every": 0, "data.train": "data/kjv/train.txt",
            "data.val": "data/kjv/val.txt"}
    # The tokenizer and token files first (not timed, not in the RSS): a run with 1 step makes them.
    prep = dict(sets, **{"train.max_steps": 1, "train.warmup_steps": 0})
    subprocess.run([exe, "train", "--overwrite"] + [a for k, v in prep.items() for a in ("--set", f"{k}={v}")],
                   check=True, capture_output=True)
    log, rss = run_measured([exe, "train", "--overwrite"] + [a for k, v in sets.items() for a in ("--set", f"{k}={v}")])
    # "OpenBLAS kernels X (why)"; builds before the kernel rule logged "OpenBLAS X kernels" (--against)
    found = re.search(r"OpenBLAS kernels (\S+)|OpenBLAS (\S+) kernels", log)
    ran = found and (found.group(1) or found.group(2))
    if CEILING_CORE not in (None, "?") and (not ran or ran.lower() != CEILING_CORE.lower()):
        raise RuntimeError(f"lmtrain ran OpenBLAS {ran or '?'} kernels, the ceiling "
                           f"{CEILING_CORE}: the fraction would compare different kernels")
    rates = [r["tokens_per_s"] for r in map(json.loads, open(os.path.join(run_dir, "metrics.jsonl")))
             if r["kind"] == "train"]
    precision = re.search(r"precision (fp32|bf16)", log)
    PRECISIONS[name] = precision.group(1) if precision else "fp32"
    LOGS[name] = log
    return statistics.median(rates[1:] if len(rates) > 1 else rates), rss


PRECISIONS = {}  # lmtrain run name: the precision its log names
PRECISION = "auto"  # run.precision of every lmtrain run (--precision)
LOGS = {}  # lmtrain run name: its log


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lmtrain", default="build/lmtrain")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--out", default="build/bench")
    ap.add_argument("--blas-threads", type=int, default=os.cpu_count())
    ap.add_argument("--repeats", type=int, default=1, help="alternated lmtrain/reference runs per config")
    ap.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16"], help="run.precision of lmtrain's runs")
    ap.add_argument("--against", metavar="OLD_LMTRAIN",
                    help="only config S: this lmtrain against OLD_LMTRAIN (another build), alternated --repeats times")
    ap.add_argument("--reference-only", help=argparse.SUPPRESS)  # internal: one reference in this process
    ap.add_argument("--ceiling-only", help=argparse.SUPPRESS)  # internal: the ceiling for N threads
    ap.add_argument("--split", action="store_true", help=argparse.SUPPRESS)  # internal: ... in row blocks
    ap.add_argument("--bf16-ceiling-only", help=argparse.SUPPRESS)  # internal: the bf16 ceiling for N threads
    ap.add_argument("--autocast-only", help=argparse.SUPPRESS)  # internal: one autocast reference
    args = ap.parse_args()
    if args.bf16_ceiling_only:
        t = int(args.bf16_ceiling_only)
        print(json.dumps({"2048^3": bf16_ceiling(t), **{"x".join(map(str, s)): bf16_ceiling(t, s) for s in S_SHAPES}}))
        return
    if args.autocast_only:
        print(json.dumps({"tokens_per_s": reference(*CONFIGS[args.autocast_only], args.steps,
                                                    autocast_threads=args.blas_threads)}))
        return
    if args.ceiling_only:
        gflops = ceiling(int(args.ceiling_only), args.split)
        print(blas_core_name())
        print(gflops)
        return
    if args.reference_only:
        print(json.dumps({"tokens_per_s": reference(*CONFIGS[args.reference_only], args.steps)}))
        return
    os.makedirs(args.out, exist_ok=True)
    global PRECISION
    PRECISION = args.precision
    chosen = lmtrain_kernels(args.lmtrain)
    if chosen and "OPENBLAS_CORETYPE" not in os.environ:
        os.environ["OPENBLAS_CORETYPE"] = chosen[0]  # the Python processes run lmtrain's kernels
    import torch
    print(f"torch {torch.__version__} (LibTorch), {os.cpu_count()} vCPUs; lmtrain {args.lmtrain}; "
          f"{args.steps} steps per config, tokens/s = median of 6 windows after warm-up" +
          (f"; median of {args.repeats} alternated lmtrain/reference runs per config" if args.repeats > 1 else ""))
    blas = args.blas_threads
    ceil, split = measure_ceiling(blas)
    print("ceiling: fp32 2048x2048 matmul, best of 6: " +
          ", ".join(f"{g:.1f} GFLOP/s on {t} thread{'s' if t > 1 else ''}" for t, g in sorted(ceil.items())) +
          (f"; {split:.1f} as {blas} single-threaded row blocks" if split else ""))
    print(f"OpenBLAS kernels: {CEILING_CORE} (lmtrain's choice here: {chosen[0] + ' (' + chosen[1] + ')' if chosen else '?'}"
          "; every lmtrain run's log must name the same)")
    out, _ = run_measured([sys.executable, __file__, "--bf16-ceiling-only", str(blas)])
    bf16 = json.loads(out.strip().splitlines()[-1])
    print(f"bf16 ceiling (LibTorch's bf16 mm, oneDNN, {blas} threads, best of 6), GFLOP/s: " +
          ", ".join(f"{k} {v:.1f}" for k, v in bf16.items()))
    tops = [max(ceil[blas], split or 0.0)]  # the best `blas`-thread figure, measured again before each lmtrain run
    if args.against:
        return against(args, blas, tops)
    rows = []  # (label, V, T, B, lmtrain tok/s, ref tok/s or None, FLOPs/token, lmtrain RSS, ref RSS, note)
    autocast = []  # config S's reference under bf16 autocast, tokens/s per repeat
    for name, cfg in CONFIGS.items():
        V, C, L, H, T, B = cfg
        # The same BLAS pool size as lmtrain (torch.set_num_threads does not reach OpenBLAS's own pool).
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(blas), **MALLOC_ENV)
        runs = []  # (lmtrain tok/s, lmtrain RSS, reference tok/s, reference RSS) per repeat
        for _ in range(max(1, args.repeats)):
            again, again_split = measure_ceiling(blas, only=blas)
            tops.append(max(again[blas], again_split or 0.0))
            ours, ours_rss = lmtrain_run(args.lmtrain, args.out, name, *cfg, args.steps, blas)
            out, ref_rss = run_measured([sys.executable, __file__, "--reference-only", name, "--steps", str(args.steps)], env)
            runs.append((ours, ours_rss, json.loads(out.strip().splitlines()[-1])["tokens_per_s"], ref_rss))
            if name == "S":  # the reference under bf16 autocast, alternated with the others
                out, _ = run_measured([sys.executable, __file__, "--autocast-only", name, "--steps", str(args.steps),
                                       "--blas-threads", str(blas)], env)
                autocast.append(json.loads(out.strip().splitlines()[-1])["tokens_per_s"])
        ours, ref = statistics.median(r[0] for r in runs), statistics.median(r[2] for r in runs)
        f = model_flops_per_token(*cfg[:5])
        note = ""
        if len(runs) > 1:
            note = (f"runs: lmtrain {' / '.join(f'{r[0]:,.0f}' for r in runs)}; reference "
                    f"{' / '.join(f'{r[2]:,.0f}' for r in runs)}; ratios {' / '.join(f'{r[0] / r[2]:.2f}x' for r in runs)}")
        rows.append((name, V, T, B, ours, ref, f, max(r[1] for r in runs), max(r[3] for r in runs), note))
        if name == "S":
            rows.append(("S autocast", V, T, B, ours, statistics.median(autocast), f, runs[0][1], None,
                         f"(ratio against the reference under torch.autocast bf16 on {blas} LibTorch threads: "
                         f"{' / '.join(f'{a:,.0f}' for a in autocast)} tokens/s)"))
            # the same lmtrain on LibTorch's own ops and OpenBLAS's own threads
            plain, plain_rss = lmtrain_run(args.lmtrain, args.out, "S-plain", *cfg, args.steps, blas, kernels="plain")
            rows.append(("S plain", V, T, B, plain, ref, f, plain_rss, None,
                         f"(run.kernels plain: 1 LibTorch + {blas} OpenBLAS threads; ratio against the S reference)"))
    top = max(tops)
    print(f"ceiling again before each lmtrain run (best {blas}-thread figure): {' / '.join(f'{t:.1f}' for t in tops[1:])}")
    print(f"lmtrain: run.kernels fused, its precision auto (per run: {', '.join(f'{k} {v}' for k, v in PRECISIONS.items())}); "
          f"reference: 1 LibTorch thread, {blas} OpenBLAS thread{'s' if blas > 1 else ''}; 'of ceiling' = lmtrain "
          f"GFLOP/s / the ceiling of the precision it ran: fp32 {top:.1f} (the best {blas}-thread figure of all the "
          f"measurements above), bf16 {bf16['2048^3']:.1f}")
    print("model FLOPs/token = 6 x (parameters except positions) + 12 x L x C x T")
    print(f"{'config':<8} {'V':>5} {'T':>4} {'B':>3} {'lmtrain tok/s':>14} {'ref tok/s':>10} {'ratio':>6} "
          f"{'lmtrain GFLOP/s':>16} {'of ceiling':>10} {'ref GFLOP/s':>12} {'lmtrain RSS MiB':>16} {'ref RSS MiB':>12}")
    for label, V, T, B, ours, ref, f, ours_rss, ref_rss, note in rows:
        plain = ref_rss is None
        ceiling_of = bf16["2048^3"] if PRECISIONS.get(label.split()[0] if label.endswith("autocast") else label.replace(" ", "-")) == "bf16" else top
        print(f"{label:<8} {V:>5} {T:>4} {B:>3} {ours:>14,.0f} {'' if plain else f'{ref:,.0f}':>10} {ours / ref:>5.2f}x "
              f"{ours * f / 1e9:>16.1f} {ours * f / 1e9 / ceiling_of:>9.0%} {'' if plain else f'{ref * f / 1e9:.1f}':>12} "
              f"{ours_rss:>16,.0f} {'' if plain else f'{ref_rss:,.0f}':>12}" + (f"   {note}" if plain else ""))
        if note and not plain:
            print(f"{'':<8} {note}")
    adamw = lmtrain_run(args.lmtrain, args.out, "S", *CONFIGS["S"], args.steps, blas)[0]
    muon = lmtrain_run(args.lmtrain, args.out, "S-muon", *CONFIGS["S"], args.steps, blas, "muon")[0]
    print(f"config S with train.optimizer: muon (Newton-Schulz on the 16 block matrices each step): {muon:,.0f} "
          f"tokens/s against {adamw:,.0f} with adamw run right before it: {muon / adamw:.2f}x")
    encode_speed(args.lmtrain, args.out)


def against(args, blas, tops):
    """Config S on two builds, alternated (old, new, old, new, ...): the medians, their ratio, each run's ratio
    to the run before it, and the fraction of the ceiling. For a change that must not move the speed."""
    V, C, L, H, T, B = CONFIGS["S"]
    f = model_flops_per_token(V, C, L, H, T)
    old, new = [], []
    for _ in range(max(1, args.repeats)):
        again, again_split = measure_ceiling(blas, only=blas)
        tops.append(max(again[blas], again_split or 0.0))
        old.append(lmtrain_run(args.against, args.out, "S-old", *CONFIGS["S"], args.steps, blas)[0])
        new.append(lmtrain_run(args.lmtrain, args.out, "S-new", *CONFIGS["S"], args.steps, blas)[0])
    top = max(tops)
    o, n = statistics.median(old), statistics.median(new)
    print(f"config S, {len(old)} alternated runs each: old {args.against}: {' / '.join(f'{r:,.0f}' for r in old)} "
          f"tokens/s; new {args.lmtrain}: {' / '.join(f'{r:,.0f}' for r in new)}")
    print(f"medians: old {o:,.0f} ({o * f / 1e9 / top:.0%} of the {top:.1f} GFLOP/s ceiling), new {n:,.0f} "
          f"({n * f / 1e9 / top:.0%}); new / old = {n / o:.3f}")


def encode_speed(exe, out):
    """lmtrain prepare vs SentencePiece's spm_encode (ids), same model and file, best of 3 each. The file is the
    whole KJV text as scripts/get_corpus.sh leaves it (train.txt then val.txt: 4.1 MB; `bible` prints 4.4 MB
    with the verse references get_corpus.sh strips)."""
    model, text = os.path.join(out, "S", "tokenizer.model"), os.path.join(out, "kjv-all.txt")
    with open(text, "wb") as whole:
        for part in ("data/kjv/train.txt", "data/kjv/val.txt"):
            with open(part, "rb") as f:
                whole.write(f.read())
    def best(cmd, **kw):
        t = []
        for _ in range(3):
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, **kw)
            t.append(time.perf_counter() - t0)
        return min(t)
    ours = best([exe, "prepare", "--tokenizer", model, "--input", text, "--output", os.path.join(out, "kjv.bin")],
                capture_output=True)
    with open(os.devnull, "w") as null:
        theirs = best(["spm_encode", f"--model={model}", "--output_format=id", text], stdout=null)
    mb = os.path.getsize(text) / 1e6
    print(f"encoding {text} ({mb:.1f} MB) with the S tokenizer, best of 3: lmtrain prepare {ours:.2f} s "
          f"({mb / ours:.1f} MB/s), spm_encode {theirs:.2f} s ({mb / theirs:.1f} MB/s): {theirs / ours:.2f}x")


if __name__ == "__main__":
    main()
