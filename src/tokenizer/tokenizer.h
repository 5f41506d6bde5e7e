// Tokenizer: a normal C++ face over the SentencePiece bridge library, which is dlopen'ed privately
// (RTLD_LOCAL | RTLD_DEEPBIND) so its protobuf never meets LibTorch's. Also owns tokenizer training.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/corpus_text.h"
#include "tokenizer/tokenizer_config.h"
#include "tokenizer/training_text.h"

namespace lm::tokenizer {

/// Trains a SentencePiece model from the UTF-8 text of `corpus` and writes it to `model_path` atomically: on
/// any failure (e.g. vocab_size above what the corpus allows) no file is left at `model_path`. Several files,
/// or a sample (tokenizer_sample_lines), are streamed into one temporary training text beside `model_path`;
/// the sample is drawn by reservoir sampling with `seed`, so a corpus, its settings and a seed always give the
/// same tokenizer. Throws DataError with SentencePiece's own message.
void train_tokenizer(const CorpusFiles& corpus, const std::filesystem::path& model_path, const TokenizerConfig& cfg,
                     int threads, uint64_t seed = 0);

/// Trains the tokenizer unless `model_path` already exists and its sidecar `model_path.json` records the
/// same corpus (corpus_sha256) and settings (and seed, when it sampled). Returns true when it trained.
/// Throws like train_tokenizer.
bool ensure_tokenizer(const CorpusFiles& corpus, const std::filesystem::path& model_path, const TokenizerConfig& cfg,
                      int threads, uint64_t seed = 0);

/// A loaded SentencePiece model. Move-only.
class Tokenizer {
 public:
  /// Loads a model file. Throws DataError when missing or invalid.
  explicit Tokenizer(const std::filesystem::path& model_path);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  std::vector<int32_t> encode(std::string_view text) const;
  std::string decode(const std::vector<int32_t>& ids) const;
  int32_t vocab_size() const;
  /// Piece text of an id (SentencePiece marks word starts with U+2581). Throws DataError when out of range.
  std::string piece(int32_t id) const;
  int32_t piece_to_id(const std::string& piece) const;
  int32_t eos_id() const;
  int32_t unk_id() const;
  /// The padding id, -1 when the model has none (lmtrain's tokenizers have none).
  int32_t pad_id() const;
  /// The characters of `text` (one entry per occurrence, spaces aside) that encode to the unknown piece.
  std::vector<std::string> unknown_characters(std::string_view text) const;
  /// SHA-256 of the model file: identifies the tokenizer in token files and checkpoints.
  const std::string& sha256() const { return sha256_; }

 private:
  struct Handle;
  std::unique_ptr<Handle> h_;
  std::string sha256_;
};

/// For every id, the UTF-8 bytes it stands for in decoded text, the denominator of bits per byte: a
/// piece's bytes with each word-start mark U+2581 counted as the one space it decodes to (so a line's
/// leading mark stands for the newline before it), 0 for `</s>` (that newline, already counted) and `<s>`,
/// 1 for a byte piece `<0xHH>` and for `<unk>` (at least one byte of text it replaced).
std::vector<int32_t> decoded_bytes_per_id(const Tokenizer& tok);

/// Path of the bridge library: $LMTRAIN_SPBRIDGE if set, else next to the running executable.
std::filesystem::path bridge_library_path();

}  // namespace lm::tokenizer
