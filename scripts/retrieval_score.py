#!/usr/bin/env python3
"""Retrieval scores of paired vectors (scripts/bench_embed.sh): query i's right document is document i.

Each query's documents are ranked by cosine similarity; the right one's rank counts every other document
whose cosine is at least as high (ties count against the query, so identical vectors score no better than
chance). Prints top-1 and top-10 accuracy and the mean reciprocal rank, with chance (1/N, 10/N, and the MRR of
a random order, H_N / N).

Usage: scripts/retrieval_score.py QUERIES.npy DOCUMENTS.npy [--label NAME]   (float32 (N, C) arrays, N >= 2)
Needs python3-numpy only.
"""
import argparse
import sys

import numpy as np


def ranks(similarity):
    """1-based rank of the diagonal entry of each row of a square matrix, ties counted against it."""
    s = np.asarray(similarity, dtype=np.float64)
    if s.ndim != 2 or s.shape[0] != s.shape[1] or s.shape[0] < 2:
        raise ValueError("expected a square matrix of at least 2 x 2, got shape %s" % (s.shape,))
    right = np.diag(s)[:, None]
    beaten = (s >= right).sum(axis=1) - 1  # the others at least as similar (the diagonal itself left out)
    return beaten + 1


def cosine_matrix(queries, documents):
    q = np.asarray(queries, dtype=np.float64)
    d = np.asarray(documents, dtype=np.float64)
    if q.shape != d.shape or q.ndim != 2:
        raise ValueError("expected two (N, C) arrays of one shape, got %s and %s" % (q.shape, d.shape))
    q = q / np.maximum(np.linalg.norm(q, axis=1, keepdims=True), 1e-300)
    d = d / np.maximum(np.linalg.norm(d, axis=1, keepdims=True), 1e-300)
    return q @ d.T


def scores(r, ks=(1, 10)):
    """{"top1": .., "top10": .., "mrr": ..} of the ranks r."""
    r = np.asarray(r)
    out = {"top%d" % k: float((r <= k).mean()) for k in ks}
    out["mrr"] = float((1.0 / r).mean())
    return out


def chance(n, ks=(1, 10)):
    out = {"top%d" % k: min(k, n) / n for k in ks}
    out["mrr"] = sum(1.0 / i for i in range(1, n + 1)) / n
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("queries")
    ap.add_argument("documents")
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    try:
        r = ranks(cosine_matrix(np.load(args.queries), np.load(args.documents)))
    except (OSError, ValueError) as e:
        print("retrieval_score: %s" % e, file=sys.stderr)
        return 2
    s, c = scores(r), chance(len(r))
    print("%s\tN=%d\ttop1=%.4f\ttop10=%.4f\tmrr=%.4f\tchance_top1=%.4f\tchance_top10=%.4f\tchance_mrr=%.4f"
          % (args.label, len(r), s["top1"], s["top10"], s["mrr"], c["top1"], c["top10"], c["mrr"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
