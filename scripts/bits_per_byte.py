#!/usr/bin/env python3
"""Bits per byte of a checkpoint on its validation token file, two ways (scripts/bench_gguf.sh, a benchmark).

`all`: every target, each id counting the bytes lmtrain counts for it (tokenizer.cpp decoded_bytes_per_id:
<unk> and a byte piece <0xNN> count 1), the figure lmtrain's final validation prints. `shared`: the same
without the targets that are <unk> or byte pieces, nor their bytes: the text that a vocabulary with byte
pieces and one without both spell with ordinary pieces, so the two compare on equal terms.

Usage: scripts/bits_per_byte.py HF_DIR VAL_BIN GGUF
  HF_DIR  `lmtrain export --format hf` of the checkpoint (the forward is scripts/check_hf_export.py's)
  VAL_BIN the run's val.bin; GGUF an `--format gguf` export of the same checkpoint (for its piece list)
       scripts/bits_per_byte.py --loss HF_DIR VAL_BIN W
  the mean loss in nats/token over W evenly spread windows, laid out as lmtrain's validation and
  scripts/check_gguf.mjs --loss lay them
"""
import json
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_hf_export  # noqa: E402
import read_gguf  # noqa: E402


def piece_bytes(p):
    if p in ("</s>", "<s>"):
        return 0
    if p == "<unk>" or (len(p) == 6 and p.startswith("<0x")):
        return 1
    return len(p.encode()) - 2 * p.count("\u2581")  # each word-start mark is the one space it decodes to


def windows(hf, val, n=None):
    """(window ids, next-token losses in nats) of n evenly spread windows of the token file (all when None)."""
    cfg = json.load(open(os.path.join(hf, "config.json")))
    w = check_hf_export.read_weights(os.path.join(hf, "model.safetensors"))
    raw = open(val, "rb").read()
    width = int.from_bytes(raw[12:16], "little")
    ids = np.frombuffer(raw[256:], dtype="<u2" if width == 2 else "<u4").astype(np.int64)
    T = cfg["n_positions"]
    total = (len(ids) - 1) // T
    n = total if n is None else min(n, total)
    with torch.no_grad():
        for k in range(n):
            x = ids[(k * total // n) * T:][:T + 1]
            logp = check_hf_export.gpt2_log_probs(cfg, w, torch.tensor(x[:-1]))
            yield x, -logp[torch.arange(T), torch.tensor(x[1:])].numpy()


def main():
    if sys.argv[1] == "--loss":
        losses = [nll.mean() for _, nll in windows(sys.argv[2], sys.argv[3], int(sys.argv[4]))]
        print(f"{sum(losses) / len(losses):.4f}")
        return
    hf, val, gguf = sys.argv[1:4]
    pieces = read_gguf.read(gguf)["metadata"]["tokenizer.ggml.tokens"][1][1]
    special = np.array([p == "<unk>" or (len(p) == 6 and p.startswith("<0x")) for p in pieces])
    nbytes = np.array([piece_bytes(p) for p in pieces])
    nats = {"all": 0.0, "shared": 0.0}
    count = {"all": 0, "shared": 0}
    unknown = 0
    for x, nll in windows(hf, val):  # every window, as lmtrain's final validation
        y = x[1:]
        unknown += int(special[y].sum())
        nats["all"] += nll.sum()
        count["all"] += nbytes[y].sum()
        keep = ~special[y]
        nats["shared"] += nll[keep].sum()
        count["shared"] += nbytes[y][keep].sum()
    print(" ".join(f"{k} {nats[k] / math.log(2) / count[k]:.4f}" for k in nats), f"(unk/byte targets {unknown})")


if __name__ == "__main__":
    main()
