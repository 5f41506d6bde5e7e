// Reading a model's predictions: the next-token distribution after a context, and text generation
// (temperature, top-k, top-p, stops, several samples) with a key/value cache or by full recompute.
//
// Context window: the model sees at most max_seq_len tokens. A prompt longer than that keeps its last
// max_seq_len tokens (fit_prompt). When generation fills the window, it slides: the oldest tokens are
// dropped so that the newest max_seq_len/2 remain, and those are re-encoded at positions 0.. (one prefill
// every max_seq_len/2 new tokens, instead of one full recompute per token). The full-recompute path uses
// the same window, so both paths see the same tokens at the same positions and give the same logits.
// Sinusoidal and rotary positions exist for every position, so with `extend_positions` the window never slides and
// positions run past max_seq_len (the model was never trained on them: expect worse text).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
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

/// Softmax of the last position's logits after `context` (V) float64; contexts longer than max_seq_len
/// keep their last max_seq_len tokens. REQUIRES: context not empty.
torch::Tensor next_token_probs(model::GptImpl& model, const std::vector<int32_t>& context);

/// The k most likely tokens, most likely first. REQUIRES: 1 <= k <= V.
std::vector<TokenProb> top_k(const torch::Tensor& probs, int k, const tokenizer::Tokenizer& tok);

/// Most tokens one sample may add (`--generate`), and most positions with `--extend-positions` (whose cache
/// keeps every key and value). Larger requests are refused, not clamped.
inline constexpr int64_t kMaxNewTokens = 1000000;
inline constexpr int64_t kMaxExtendedPositions = 65536;

/// Generation settings. Bad values are rejected (ConfigError), never clamped.
struct GenerateOptions {
  int64_t max_new_tokens = 64;  ///< tokens to add; >= 0
  double temperature = 1.0;     ///< 0 = greedy; > 0 divides the logits
  int64_t top_k = 0;            ///< keep the k most likely before sampling; 0 = all
  double top_p = 1.0;           ///< keep the smallest most-likely set whose probability reaches p; (0, 1]
  uint64_t seed = 0;            ///< sample i of a call uses seed + i: same seed, same text
  int32_t stop_id = -1;         ///< stop after emitting this id (end of text); -1 = never
  /// Stop after the token for which this returns true (e.g. the decoded text holds a stop string).
  std::function<bool(const std::vector<int32_t>& new_ids)> stop_when;
  bool use_cache = true;           ///< false: recompute the whole window for every token (baseline)
  bool extend_positions = false;   ///< sinusoidal or rope: never slide, run positions past max_seq_len
  /// Test/benchmark hook: the float64 logits (V) each token is drawn from, step 0 first.
  std::function<void(int64_t step, const torch::Tensor& logits)> on_logits;
};

/// Why a sample ended.
enum class StopReason { kLength, kEndOfText, kStopString };
std::string to_string(StopReason r);

struct Sample {
  std::vector<int32_t> ids;  ///< the new tokens only
  StopReason stop = StopReason::kLength;
  int64_t window_slides = 0;  ///< times the context window slid (see the file comment)
};

/// Throws ConfigError naming the first bad option (also checked by generate), and for n < 1 samples.
void check_options(const model::GptImpl& model, const GenerateOptions& opt, int64_t n = 1);

/// `n` samples continuing `context` (REQUIRES: context.size() <= max_seq_len, see fit_prompt). With the
/// cache the prompt is encoded once and shared.
std::vector<Sample> generate(model::GptImpl& model, const std::vector<int32_t>& context, const GenerateOptions& opt,
                             int64_t n = 1);

/// The last max_seq_len ids of `context`; sets `dropped` to how many were cut. With `no_truncate`, a
/// context that does not fit is a ConfigError instead.
std::vector<int32_t> fit_prompt(const std::vector<int32_t>& context, int64_t max_seq_len, bool no_truncate,
                                int64_t& dropped);

/// The ids a prompt is conditioned on: the end-of-line id (which precedes every line in training
/// data) followed by the prompt's pieces.
std::vector<int32_t> prompt_context(const tokenizer::Tokenizer& tok, const std::string& prompt);

}  // namespace lm::sample
