// Sentence vectors from a checkpoint (`lmtrain embed`): one vector per line, pooled from the hidden states
// (mean, position-weighted mean, last piece) or from the raw input rows (--from-input, the bag of token
// embeddings without context); written as safetensors, .npy or TSV for the Embedding Projector; and a
// brute-force cosine search over an embedded file with its vectors cached beside it (docs/inspect.md).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "model/gpt.h"
#include "model/pool.h"
#include "tokenizer/tokenizer.h"

namespace lm::inspect {

using Pool = model::Pool;  ///< mean | weighted | last (model/pool.h)

struct EmbedOptions {
  Pool pool = Pool::kMean;
  int layer = -1;           ///< -1: the final hidden states (after ln_f); 0: the input vectors; N: after block N-1
  bool from_input = false;  ///< the mean of the raw input rows instead (pool and layer unused)
  int64_t batch = 32;       ///< lines per forward pass
};

/// "mean" | "weighted" | "last"; ConfigError otherwise.
Pool parse_pool(const std::string& name);
/// "pool=mean layer=final" / "from-input": the options that decide the vectors (cache key, metadata, logs).
std::string describe(const EmbedOptions& o);

/// Lines of a UTF-8 text file (one text per line, the last newline optional). Throws DataError for an empty
/// file, invalid UTF-8, a NUL byte or a blank line (naming its number).
std::vector<std::string> read_lines(const std::filesystem::path& path);

/// Text `line` (1-based, for the message) as embed reads it: the implied line start, then its pieces, cut to
/// `max_seq_len` ids. Throws DataError when the text has no piece.
std::vector<int32_t> line_ids(const tokenizer::Tokenizer& tok, const std::string& text, int64_t max_seq_len, size_t line);

/// What embedding `texts` will meet, found with the tokenizer alone (before any forward pass): lines cut to
/// the context, lines with characters the tokenizer does not know (and the first few of those). Throws
/// DataError, as line_ids, for a line without pieces.
struct LineCheck {
  int64_t cut = 0, unknown_lines = 0;
  std::vector<std::string> unknown_characters;
};
LineCheck check_lines(const tokenizer::Tokenizer& tok, const std::vector<std::string>& texts, int64_t max_seq_len);

struct Embedded {
  torch::Tensor vectors;  ///< (N,C) float32
};

/// The vector of every text. `progress(done, total)` is called after each batch when given. Throws
/// ConfigError for a layer outside -1..n_layers or batch < 1, DataError for a text without pieces (named
/// "line N").
Embedded embed_texts(model::GptImpl& model, const tokenizer::Tokenizer& tok, const std::vector<std::string>& texts,
                     const EmbedOptions& o, const std::function<void(size_t, size_t)>& progress = nullptr);

/// Throws ConfigError unless `out` ends in .safetensors, .npy or .tsv, lies in an existing directory and is
/// either absent or an embedding file (is_embedding_file; for .tsv, its .metadata.tsv too, with as many
/// lines): checked before any work, and again on writing. `role` names it in the message ("--out").
void check_embedding_output(const std::filesystem::path& out, const std::string& role = "--out");

/// Writes vectors (N,C) by the extension of `out`: .safetensors (tensor "embeddings", `metadata` in
/// __metadata__), .npy (float32, C order), .tsv (one row per vector, tab-separated, plus OUT-without-.tsv
/// + ".metadata.tsv" with each text, for the TensorFlow Embedding Projector). Atomic. ConfigError for another
/// extension, or when `out` exists and is not an embedding file (check_embedding_output; never overwritten).
void write_embeddings(const std::filesystem::path& out, const torch::Tensor& vectors, const std::vector<std::string>& texts,
                      std::map<std::string, std::string> metadata, const std::string& role = "--out");

/// True when `path` holds vectors this command writes: a safetensors file with format lmtrain-embed, a
/// 2-D float32 .npy, or a .tsv of numbers with the same count on every line.
bool is_embedding_file(const std::filesystem::path& path);

/// The `k` rows of `vectors` (N,C) most cosine-similar to `query` (C), best first: (row, cosine).
std::vector<std::pair<int64_t, double>> nearest_lines(const torch::Tensor& vectors, const torch::Tensor& query, int k);

/// The cache beside a lines file: LINES.embed-cache.safetensors.
std::filesystem::path cache_path(const std::filesystem::path& lines);

}  // namespace lm::inspect
