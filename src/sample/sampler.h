// Reading a model's predictions: the next-token distribution after a context, and text generation with
// temperature and top-k. Contexts longer than max_seq_len keep their last max_seq_len tokens.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "model/gpt.h"
#include "tokenizer/tokenizer.h"

namespace lm::sample {

/// One row of a next-token table.
struct TokenProb {
  int rank = 0;          ///< 1 = most likely
  int32_t id = 0;
  std::string piece;
  double prob = 0.0;
};

/// Softmax of the last position's logits after `context` (V) float64. REQUIRES: context not empty.
torch::Tensor next_token_probs(model::GptImpl& model, const std::vector<int32_t>& context);

/// The k most likely tokens, most likely first. REQUIRES: 1 <= k <= V.
std::vector<TokenProb> top_k(const torch::Tensor& probs, int k, const tokenizer::Tokenizer& tok);

/// Generation settings. Bad values are rejected (ConfigError), never clamped.
struct GenerateOptions {
  int64_t max_new_tokens = 64;  ///< tokens to add; >= 0
  double temperature = 1.0;     ///< 0 = greedy; > 0 divides the logits
  int64_t top_k = 0;            ///< keep the k most likely before sampling; 0 = all
  uint64_t seed = 0;            ///< same seed, same text
  int32_t stop_id = -1;         ///< stop after emitting this id (e.g. end of line); -1 = never
};

/// Appends up to max_new_tokens sampled ids to `context` and returns only the new ids.
std::vector<int32_t> generate(model::GptImpl& model, std::vector<int32_t> context, const GenerateOptions& opt);

/// The ids a prompt is conditioned on: the end-of-line id (which precedes every line in training
/// data) followed by the prompt's pieces.
std::vector<int32_t> prompt_context(const tokenizer::Tokenizer& tok, const std::string& prompt);

}  // namespace lm::sample
