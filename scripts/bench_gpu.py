#!/usr/bin/env python3
"""GPU training benchmark, run by scripts/gpu_check.sh: lmtrain against the team's own PyTorch eager
implementation of the same model and optimizer, on the same card in the same invocation.

The eager baseline: pre-LN GPT with a fused qkv projection, learned positions, erf GELU, tied head (lmtrain's
architecture, docs/ARCHITECTURE.md "Model contract"), F.scaled_dot_product_attention, fused AdamW, bf16
autocast for bf16, no torch.compile (its figure is printed for reference when it works). lmtrain trains the
same shape on the KJV corpus through its CLI; tokens/s is the median of its logged windows after the first.
Speed does not depend on the token values, so the baseline uses random ids.

Usage: scripts/bench_gpu.py --lmtrain build-gpu/lmtrain [--steps 300] [--out DIR]
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

CONFIGS = {  # name: (V, C, L, H, T, B, precision)
    "S fp32": (8192, 256, 4, 4, 128, 16, "fp32"),
    "S bf16": (8192, 256, 4, 4, 128, 16, "bf16"),
    "S B256 bf16": (8192, 256, 4, 4, 128, 256, "bf16"),
}


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln1, self.ln2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.qkv, self.proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.fc, self.out = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.H, C // self.H).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class Gpt(nn.Module):
    def __init__(self, V, C, L, H, T):
        super().__init__()
        self.tok_emb, self.pos_emb = nn.Embedding(V, C), nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, H) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * L) if name.endswith(("proj.weight", "out.weight")) else 0.02)

    def forward(self, idx, targets):
        x = self.tok_emb(idx) + self.pos_emb.weight[: idx.shape[1]]
        for b in self.blocks:
            x = b(x)
        logits = F.linear(self.ln_f(x), self.tok_emb.weight)
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def eager_tokens_per_s(V, C, L, H, T, B, precision, steps, compile_model=False):
    torch.manual_seed(0)
    model = Gpt(V, C, L, H, T).cuda()
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and "emb" not in n]
    other = [p for n, p in model.named_parameters() if not (p.dim() == 2 and "emb" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), fused=True)
    run = torch.compile(model) if compile_model else model
    x = torch.randint(V, (B, T), device="cuda")
    y = torch.randint(V, (B, T), device="cuda")
    torch.cuda.reset_peak_memory_stats()

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = run(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(20):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    return B * T * steps / (time.perf_counter() - t0), torch.cuda.max_memory_allocated() / 2**20


def lmtrain_tokens_per_s(exe, out, name, V, C, L, H, T, B, precision, steps):
    run_dir = os.path.join(out, name.replace(" ", "_"))
    sets = {"run.dir": run_dir, "run.device": "cuda", "run.precision": precision, "tokenizer.vocab_size": V,
            "model.d_model": C, "model.n_layers": L, "model.n_heads": H, "model.max_seq_len": T,
            "train.batch_size": B, "train.max_steps": steps, "train.warmup_steps": 10, "train.eval_every": 0,
            "train.log_every": max(steps // 6, 1), "checkpoint.every": 0, "data.train": "data/kjv/train.txt",
            "data.val": "data/kjv/val.txt"}
    cmd = [exe, "train", "--overwrite"] + [a for k, v in sets.items() for a in ("--set", f"{k}={v}")]
    log = subprocess.run(cmd, capture_output=True, text=True)
    if log.returncode != 0:
        raise RuntimeError(f"lmtrain failed ({log.returncode}): {log.stderr[-2000:]}")
    rates = [r["tokens_per_s"] for r in map(json.loads, open(os.path.join(run_dir, "metrics.jsonl")))
             if r["kind"] == "train"]
    return statistics.median(rates[1:] if len(rates) > 1 else rates)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lmtrain", required=True)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--out", default="build-gpu/bench")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    print(f"device {torch.cuda.get_device_name(0)}, torch {torch.__version__}; tokens/s after warm-up")
    rows = []
    for name, (V, C, L, H, T, B, prec) in CONFIGS.items():
        eager, mem = eager_tokens_per_s(V, C, L, H, T, B, prec, 50)
        try:
            compiled = f"{eager_tokens_per_s(V, C, L, H, T, B, prec, 50, compile_model=True)[0]:,.0f}"
        except Exception as e:  # noqa: BLE001 - reference figure only
            compiled = f"n/a ({type(e).__name__})"
        ours = lmtrain_tokens_per_s(args.lmtrain, args.out, name, V, C, L, H, T, B, prec, args.steps)
        rows.append((name, ours, eager, ours / eager, mem, compiled))
    print(f"{'config':<14} {'lmtrain tok/s':>14} {'eager tok/s':>12} {'ratio':>6} {'eager peak MiB':>15} "
          f"{'compile tok/s':>16}")
    for name, ours, eager, ratio, mem, compiled in rows:
        print(f"{name:<14} {ours:>14,.0f} {eager:>12,.0f} {ratio:>5.2f}x {mem:>15,.0f} {compiled:>16}")


if __name__ == "__main__":
    main()
