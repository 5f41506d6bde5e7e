// `lmtrain tokenizer stats`: trains candidate tokenizers of several sizes on a sample of a corpus and
// measures them on held-out lines of it: the cost trade-off of vocabulary size.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "model/gpt_config.h"
#include "tokenizer/tokenizer_config.h"

namespace lm::inspect {

struct StatsOptions {
  std::vector<int> sizes;               ///< candidate vocabulary sizes
  tokenizer::TokenizerConfig base;                 ///< model type and coverage (vocab_size is replaced)
  int64_t sample_bytes = 1'000'000;     ///< training text taken from the corpus (whole lines)
  int64_t heldout_every = 10;           ///< every n-th line is held out for measuring, never trained on
  model::GptConfig model;               ///< model size for the embedding share (vocab_size replaced)
  int threads = 2;
};

struct SizeStats {
  int vocab_size = 0;
  std::string error;                 ///< non-empty when this size could not be trained on the sample
  double train_seconds = 0.0;
  double tokens_per_char = 0.0, tokens_per_word = 0.0;
  double bytes_per_token = 0.0;      ///< decoded UTF-8 bytes per held-out token (tokenizer::decoded_bytes_per_id)
  double mean_line_tokens = 0.0;     ///< tokens per held-out line (+1 line start in training windows)
  double lines_over_context = 0.0;   ///< fraction of held-out lines that with their line start exceed max_seq_len
  int64_t embedding_params = 0;      ///< V x C
  double embedding_share = 0.0;      ///< of all parameters at this model size
};

struct StatsReport {
  int64_t sample_lines = 0, sample_bytes = 0, heldout_lines = 0, heldout_chars = 0, heldout_words = 0;
  std::vector<SizeStats> sizes;
};

/// One tokenizer's encoding of a text (compare_tokenizers).
struct ModelCost {
  std::filesystem::path model;
  int32_t vocab_size = 0;
  int64_t pieces = 0;             ///< ids over every line
  int64_t lines_changed = 0;      ///< lines whose ids differ from the first model's
  int64_t pieces_past_first = 0;  ///< ids >= the first model's vocabulary size (pieces an extension added)
};

struct CompareReport {
  int64_t lines = 0, bytes = 0;  ///< non-blank lines, and their UTF-8 bytes
  std::vector<ModelCost> models;
};

/// Encodes every line of `corpus` with each tokenizer in `models` (the first is the baseline): pieces per
/// byte, and how much of the encoding differs from the first's. Throws DataError.
CompareReport compare_tokenizers(const std::filesystem::path& corpus, const std::vector<std::filesystem::path>& models);
std::string format_compare(const CompareReport& r, const std::filesystem::path& corpus);

/// Throws DataError when the corpus is missing or has too few lines to hold any out.
StatsReport tokenizer_stats(const std::filesystem::path& corpus, const StatsOptions& opt);
std::string format_stats(const StatsReport& r, const StatsOptions& opt);

}  // namespace lm::inspect
