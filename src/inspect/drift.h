// Embedding drift: how far each row of an embedding table (token table, or an untied head) moved between
// two checkpoints, which pieces moved most, and how far rows that never occur in a corpus moved (weight
// decay and Adam's moments can move unseen rows too).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tokenizer/tokenizer.h"

namespace lm::inspect {

/// Summary of a set of per-row values.
struct Stats {
  double mean = 0, p50 = 0, p95 = 0, max = 0;
};

/// One of the most-moved rows.
struct MovedRow {
  int32_t id = 0;
  std::string piece;
  double l2 = 0;          ///< ||after - before||_2
  double cos_drift = 0;   ///< 1 - cos(before, after)
  int64_t count = 0;      ///< occurrences in the reference corpus
};

struct DriftReport {
  std::string tensor;          ///< e.g. "tok_emb.weight"
  int64_t rows = 0;
  Stats l2, cos_drift;         ///< over all rows
  std::vector<MovedRow> top;   ///< by L2, largest first; only rows that moved (empty: none moved)
  int64_t unseen_rows = 0;     ///< rows whose count is 0
  Stats unseen_l2;             ///< L2 drift over the unseen rows (zeros when there are none)
};

/// Per-row drift of `after` against `before` (both (V,C)): L2 distance and 1 - cosine (>= 0), float64 (V).
/// Throws CheckpointError, naming `tensor`, unless both are 2-D of one shape.
struct RowDrift {
  torch::Tensor l2, cos_drift;
};
RowDrift row_drift(const std::string& tensor, const torch::Tensor& before, const torch::Tensor& after);

/// Per-row drift of `after` against `before` (both (V,C)). `counts` has V entries (occurrences in the
/// corpus of interest; empty = unknown, then no row counts as unseen). Pieces are named through `tok`.
/// Row i is id `first_id` + i (the rows of added pieces start at the old vocabulary's size).
/// REQUIRES: equal shapes; top_k >= 0.
DriftReport drift_report(const std::string& tensor, const torch::Tensor& before, const torch::Tensor& after,
                         const std::vector<int64_t>& counts, const tokenizer::Tokenizer& tok, int top_k,
                         int32_t first_id = 0);

/// The drift of a table that a fine-tune may have grown, from `before` (V_b, C) to `after` (V_a >= V_b, C):
/// rows [0, V_b) against `before`, and, when `after` has more rows (pieces the fine-tune added), those rows
/// against `added_start` (their initial values, (V_a - V_b, C)) as a second report, "TENSOR added rows".
/// `counts` covers V_a ids (or is empty); `tok` is `after`'s tokenizer. Throws CheckpointError for tables
/// that cannot be compared so.
std::vector<DriftReport> table_drift(const std::string& tensor, const torch::Tensor& before, const torch::Tensor& after,
                                     const torch::Tensor& added_start, const std::vector<int64_t>& counts,
                                     const tokenizer::Tokenizer& tok, int top_k);

/// Occurrences of each id in [0, V) in a token file.
std::vector<int64_t> token_counts(const std::string& token_file, int64_t vocab_size);

/// A printable table of the report.
std::string format_drift(const DriftReport& r);

nlohmann::json to_json(const DriftReport& r);

}  // namespace lm::inspect
