#!/usr/bin/env python3
"""An independent forward pass over an lmtrain checkpoint directory, written from docs/formats.md (weight
names, arch.json keys) and docs/ARCHITECTURE.md (the model contract) alone, compared with
`lmtrain inspect probs --json` of the same checkpoint: for every position, the probability of the actual
next token and of the top alternatives. Covers every architecture option: learned, sinusoidal and rotary
positions (rotate-half, rope_base), embedding_scale, a tied or untied head, gelu or relu2, with or without
linear biases, qk_norm, logit_softcap. Exits 1 when any probability differs by more than --tol (default
1e-5). Needs python3-torch and python3-numpy only.

With --context, the vectors `lmtrain inspect context --json` wrote (every depth of every occurrence) are
checked instead; with --embed, the sentence vectors `lmtrain embed --out X.npy` wrote (--pool, --layer as
given to embed; --ids holds each text's ids, the line start first).

Usage: scripts/check_forward.py CHECKPOINT_DIR PROBS_JSON [--tol 1e-5]
       scripts/check_forward.py CHECKPOINT_DIR --context CONTEXT_JSON
       scripts/check_forward.py CHECKPOINT_DIR --embed VECS.npy --ids IDS.txt --pool mean|weighted|last|from-input [--layer N]
"""
import argparse
import json
import math
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import read_safetensors  # noqa: E402 - the spec reader beside this script

LN_EPS = 1e-5   # torch::nn::LayerNorm's default
QK_EPS = 1e-6   # qk_norm: x / sqrt(mean(x^2) + eps), per head


def read_weights(path):
    tensors, _ = read_safetensors.read(path)
    return {name: torch.from_numpy(array.copy()).double() for name, (_, array) in tensors.items()}


def sinusoidal(T, C):
    """PE(p, 2i) = sin(p / 10000^(2i/C)), PE(p, 2i+1) = cos(p / 10000^(2i/C)) -> (T, C)."""
    pe = torch.zeros(T, C, dtype=torch.float64)
    for p in range(T):
        for i in range(0, C, 2):
            angle = p / (10000.0 ** (i / C))
            pe[p, i] = math.sin(angle)
            pe[p, i + 1] = math.cos(angle)
    return pe


def rotate(x, base):
    """Rotate-half RoPE of x (H, T, D) at positions 0..T-1: pair (x[i], x[i + D/2]) turns by p * base^(-2i/D)."""
    D = x.shape[-1]
    half = D // 2
    out = torch.empty_like(x)
    for p in range(x.shape[1]):
        for i in range(half):
            theta = p * base ** (-2.0 * i / D)
            c, s = math.cos(theta), math.sin(theta)
            a, b = x[:, p, i], x[:, p, i + half]
            out[:, p, i] = a * c - b * s
            out[:, p, i + half] = b * c + a * s
    return out


def linear(w, name, x):
    y = x @ w[name + ".weight"].t()
    return y + w[name + ".bias"] if name + ".bias" in w else y


def hidden_states(a, w, ids):
    """Every depth's vectors for ids (a list), each (T, C) float64: the raw input rows, the input vectors
    (scaled, positions added), the residual stream after each block, the final hidden state (after ln_f)."""
    C, H, L = a["d_model"], a["n_heads"], a["n_layers"]
    D = C // H
    positions = a["positions"]
    x = w["tok_emb.weight"][ids]  # (T,C)
    states = [x]
    if a["embedding_scale"] == "sqrt_d":
        x = x * math.sqrt(C)
    T = x.shape[0]
    if positions == "learned":
        x = x + w["pos_emb.weight"][:T]
    elif positions == "sinusoidal":
        x = x + sinusoidal(T, C)
    states.append(x)
    mask = torch.ones(T, T, dtype=torch.bool).triu(1)
    for i in range(L):
        p = f"blocks.{i}."
        h = F.layer_norm(x, (C,), w[p + "ln1.weight"], w[p + "ln1.bias"], LN_EPS)
        qkv = linear(w, p + "attn.qkv", h)  # (T,3C): q | k | v
        q, k, v = (t.reshape(T, H, D).transpose(0, 1) for t in qkv.split(C, dim=1))  # (H,T,D)
        if a.get("qk_norm", False):
            q = q / torch.sqrt((q * q).mean(-1, keepdim=True) + QK_EPS)
            k = k / torch.sqrt((k * k).mean(-1, keepdim=True) + QK_EPS)
        if positions == "rope":
            q, k = rotate(q, a["rope_base"]), rotate(k, a["rope_base"])
        att = (q @ k.transpose(1, 2)) / math.sqrt(D)
        att = att.masked_fill(mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(0, 1).reshape(T, C)
        x = x + linear(w, p + "attn.proj", y)
        h = F.layer_norm(x, (C,), w[p + "ln2.weight"], w[p + "ln2.bias"], LN_EPS)
        h = linear(w, p + "mlp.fc", h)
        h = F.gelu(h) if a.get("mlp_activation", "gelu") == "gelu" else F.relu(h) ** 2
        x = x + linear(w, p + "mlp.proj", h)
        states.append(x)
    states.append(F.layer_norm(x, (C,), w["ln_f.weight"], w["ln_f.bias"], LN_EPS))
    return states


def log_probs(a, w, ids):
    """log p(next | prefix) for every position of ids (a list) -> (T, V) float64."""
    x = hidden_states(a, w, ids)[-1]
    head = w["tok_emb.weight"] if a["tie_embeddings"] else w["head.weight"]
    logits = x @ head.t()
    cap = a.get("logit_softcap", 0.0)
    if cap > 0:
        logits = cap * torch.tanh(logits / cap)
    return logits.log_softmax(-1)


def context_difference(a, w, report):
    """Largest |v_python - v_lmtrain| over every occurrence's vector at every depth of `inspect context
    --json` (its text_ids say what each text's ids are)."""
    worst, count = 0.0, 0
    for piece in report["pieces"]:
        for o in piece["occurrences"]:
            states = hidden_states(a, w, report["text_ids"][o["text"]])
            for d, vec in enumerate(o["vectors"]):
                ref = states[d][o["position"]]
                worst = max(worst, (torch.tensor(vec, dtype=torch.float64) - ref).abs().max().item())
                count += 1
    return worst, count


def pooled(a, w, ids, pool, layer):
    """One `lmtrain embed` vector for ids (the line start first): `pool` over the pieces (positions 1..) of the
    depth `layer` (-1 final, 0 the input vectors, N after block N-1), or the mean of the raw rows."""
    if pool == "from-input":
        return w["tok_emb.weight"][ids[1:]].mean(0)
    rows = hidden_states(a, w, ids)[layer + 1 if layer >= 0 else -1][1:]  # states[0] is the raw rows
    if pool == "mean":
        return rows.mean(0)
    if pool == "last":
        return rows[-1]
    weights = torch.arange(1, rows.shape[0] + 1, dtype=torch.float64)  # SGPT: i / sum(1..n)
    return (rows * (weights / weights.sum()).unsqueeze(1)).sum(0)


def read_npy(path):
    import numpy
    return torch.from_numpy(numpy.load(path).astype("float64"))


def worst_difference(logp, rows):
    """Largest |p - p_lmtrain| over the rows of `inspect probs --json`: each position's actual next token and
    its top alternatives, logp (T, V) holding log p(next | prefix) for the same ids."""
    worst = 0.0
    for t, r in enumerate(rows):
        p = logp[t].exp()
        worst = max(worst, abs(p[r["next_id"]].item() - r["prob"]))
        for alt in r["top"]:
            worst = max(worst, abs(p[alt["id"]].item() - alt["prob"]))
    return worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("probs_json", nargs="?", help="`lmtrain inspect probs --json` of the checkpoint")
    ap.add_argument("--context", help="`lmtrain inspect context --json` of the checkpoint: every vector checked")
    ap.add_argument("--embed", help="`lmtrain embed --out X.npy` of the checkpoint, checked with --ids and --pool")
    ap.add_argument("--ids", help="one line per embedded text: its ids, the line start first")
    ap.add_argument("--pool", default="mean", choices=["mean", "weighted", "last", "from-input"])
    ap.add_argument("--layer", type=int, default=-1)
    ap.add_argument("--tol", type=float, default=1e-5)
    args = ap.parse_args()
    if sum(x is not None for x in (args.probs_json, args.context, args.embed)) != 1:
        ap.error("expected one of PROBS_JSON, --context or --embed")
    arch = json.load(open(os.path.join(args.checkpoint, "arch.json")))
    options = " ".join(f"{k}={arch[k]}" for k in sorted(arch))
    w = read_weights(os.path.join(args.checkpoint, "model.safetensors"))
    with torch.no_grad():
        if args.context:
            worst, count = context_difference(arch, w, json.load(open(args.context)))
            print(f"{count} vectors ({options}): max |v_python - v_lmtrain| = {worst:.3g} (tolerance {args.tol:g})")
        elif args.embed:
            got = read_npy(args.embed)
            lines = [[int(t) for t in line.split()] for line in open(args.ids) if line.strip()]
            want = torch.stack([pooled(arch, w, ids, args.pool, args.layer) for ids in lines])
            if got.shape != want.shape:
                print(f"shape: expected {tuple(want.shape)}, got {tuple(got.shape)}")
                return 1
            worst = (got - want).abs().max().item()
            print(f"{len(lines)} vectors, pool {args.pool}, layer {args.layer} ({options}): "
                  f"max |v_python - v_lmtrain| = {worst:.3g} (tolerance {args.tol:g})")
        else:
            rows = json.load(open(args.probs_json))
            ids = [rows[0]["context_id"]] + [r["next_id"] for r in rows]
            worst = worst_difference(log_probs(arch, w, ids), rows)
            print(f"{len(rows)} positions ({options}): max |p_python - p_lmtrain| = {worst:.3g} (tolerance {args.tol:g})")
    return 0 if worst <= args.tol else 1


if __name__ == "__main__":
    sys.exit(main())
