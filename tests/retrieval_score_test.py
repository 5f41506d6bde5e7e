#!/usr/bin/env python3
"""scripts/retrieval_score.py's metric against hand-made cases (CTest embed.retrieval_metric): a 4 x 4
similarity matrix whose ranks, top-k and MRR are worked out by hand, ties counted against the query, and
cosines that ignore vector length."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import retrieval_score as rs  # noqa: E402

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


S = [[0.9, 0.1, 0.2, 0.3],   # right one highest: rank 1
     [0.8, 0.5, 0.6, 0.1],   # 0.8 and 0.6 above 0.5: rank 3
     [0.1, 0.2, 0.3, 0.4],   # 0.4 above 0.3: rank 2
     [0.7, 0.7, 0.7, 0.7]]   # three ties: rank 4 (ties count against it)
r = rs.ranks(S)
check(list(r) == [1, 3, 2, 4], "ranks of the 4 x 4 case: %s = [1, 3, 2, 4]" % list(r))
s = rs.scores(r, ks=(1, 2, 10))
check(s["top1"] == 0.25, "top-1 = 1/4 (%g)" % s["top1"])
check(s["top2"] == 0.5, "top-2 = 2/4 (%g)" % s["top2"])
check(s["top10"] == 1.0, "top-10 = 4/4 (%g)" % s["top10"])
check(abs(s["mrr"] - 25.0 / 48.0) < 1e-12, "MRR = (1 + 1/3 + 1/2 + 1/4) / 4 = 25/48 (%.6f)" % s["mrr"])
c = rs.chance(4)
check(c["top1"] == 0.25 and c["top10"] == 1.0 and abs(c["mrr"] - 25.0 / 48.0) < 1e-12, "chance for N=4: 1/4, 1, H_4/4")

q = np.array([[1.0, 0.0], [0.0, 1.0]])
check(list(rs.ranks(rs.cosine_matrix(q, np.array([[2.0, 0.0], [0.0, 3.0]])))) == [1, 1], "cosine ignores length")
check(list(rs.ranks(rs.cosine_matrix(q, np.array([[0.0, 1.0], [5.0, 0.0]])))) == [2, 2], "swapped documents: rank 2 each")
same = np.ones((3, 2))
check(list(rs.ranks(rs.cosine_matrix(same, same))) == [3, 3, 3], "identical vectors score as the worst case, not the best")
try:
    rs.cosine_matrix(np.ones((3, 2)), np.ones((2, 2)))
    check(False, "unequal counts are refused")
except ValueError:
    check(True, "unequal counts are refused")
print("%d check(s) failed" % len(failures) if failures else "all checks passed")
sys.exit(1 if failures else 0)
