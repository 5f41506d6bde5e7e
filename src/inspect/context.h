// Base coordinates and context-aware coordinates (`inspect context`, the report's context section): one
// piece in several texts, its vector at every depth of the model (the input row, the input after positions,
// the residual stream after each block, the final hidden state), the cosine between occurrences at each depth,
// the logit lens (the tied head read from each depth) and the nearest vocabulary rows.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "inspect/geometry.h"
#include "model/gpt.h"
#include "sample/sampler.h"
#include "tokenizer/tokenizer.h"

namespace lm::inspect {

/// One occurrence of the piece: text `text`, index `position` in that text's ids (0 is the implied line
/// start, so the first piece of a text sits at 1; the model position is the same index).
struct Occurrence {
  int text = 0;
  int64_t position = 0;
  std::vector<torch::Tensor> vectors;                ///< per depth, (C) float64
  std::vector<std::vector<sample::TokenProb>> lens;  ///< per depth, the top next pieces read from it
  std::vector<Neighbour> nearest_input;              ///< vocabulary rows nearest to the input row
  std::vector<Neighbour> nearest_final;              ///< output rows nearest to the final hidden state
};

struct ContextReport {
  int32_t id = 0;
  std::string piece;
  std::vector<std::string> depths;  ///< "input row", "input" (+ positions), "block 0".., "final"
  std::vector<Occurrence> occurrences;
  /// cosines[p][d]: the cosine of pair p (pairs in order (0,1), (0,2), .., (1,2), ..) at depth d.
  std::vector<std::pair<int, int>> pairs;
  std::vector<std::vector<double>> cosines;
};

/// The texts' ids as the model reads them: the implied line start, then the pieces. Throws ConfigError,
/// naming the text as `flag` and its number, when one has no piece or more than max_seq_len - 1.
std::vector<std::vector<int32_t>> context_ids(const model::GptImpl& model, const tokenizer::Tokenizer& tok,
                                              const std::vector<std::string>& texts, const std::string& flag = "--text");

/// The pieces that occur in two or more of the texts, in order of first appearance.
std::vector<int32_t> shared_pieces(const std::vector<std::vector<int32_t>>& ids);

/// The pieces to follow: `piece` (a piece or a word, as inspect neighbours reads it) when given, else every
/// shared piece. ConfigError when the texts share none.
std::vector<int32_t> context_pieces(const tokenizer::Tokenizer& tok, const std::vector<std::vector<int32_t>>& ids,
                                    const std::string& piece);

/// The report for piece `id` over every occurrence in `ids` (at least two, else ConfigError naming the piece).
/// `lens_k` next pieces per depth, `nearest_k` vocabulary rows per occurrence.
ContextReport context_report(model::GptImpl& model, const tokenizer::Tokenizer& tok,
                             const std::vector<std::vector<int32_t>>& ids, int32_t id, int lens_k, int nearest_k);

/// Cosine of two vectors in float64 as dot / sqrt(|a|^2 |b|^2): exactly 1.0 for identical vectors.
double exact_cosine(const torch::Tensor& a, const torch::Tensor& b);

/// The tables `inspect context` prints: the cosine per depth for every pair, the logit lens, the neighbours.
std::string format_context(const ContextReport& r, const std::vector<std::string>& texts);

/// The report as JSON; with `vectors`, every occurrence's vector at every depth as well.
nlohmann::json context_json(const ContextReport& r, bool vectors);

}  // namespace lm::inspect
