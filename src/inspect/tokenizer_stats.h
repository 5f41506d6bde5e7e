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

/// Throws DataError when the corpus is missing or has too few lines to hold any out.
StatsReport tokenizer_stats(const std::filesystem::path& corpus, const StatsOptions& opt);
std::string format_stats(const StatsReport& r, const StatsOptions& opt);

}  // namespace lm::inspect
