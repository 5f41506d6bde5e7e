// The text a tokenizer trains on: one corpus file as it is, or many files (or a large one) streamed into one
// temporary file of every line or of a seeded sample of lines (docs/training.md "Many files and large corpora").
#pragma once

#include <cstdint>
#include <filesystem>

#include "tokenizer/corpus_text.h"
#include "tokenizer/tokenizer_config.h"

namespace lm::tokenizer {

/// Above this many bytes of text, tokenizer.max_sentences = 0 (auto) trains on a sample of
/// kAutoSampleLines lines instead of every line.
inline constexpr uint64_t kAutoSampleBytes = 100'000'000;  // 100 MB
inline constexpr int64_t kAutoSampleLines = 1000000;

/// Lines a tokenizer trains on: `max_sentences` when > 0, else all of them up to kAutoSampleBytes of text
/// and kAutoSampleLines above; 0 = every line.
int64_t tokenizer_sample_lines(const TokenizerConfig& cfg, uint64_t corpus_bytes);

/// A training text written for SentencePiece; the file is removed when this goes out of scope. Move-only.
struct TrainingText {
  std::filesystem::path path;  ///< empty: none was written
  int64_t lines = 0;           ///< lines written
  int64_t lines_seen = 0;      ///< non-blank lines of the corpus
  TrainingText() = default;
  TrainingText(TrainingText&& o) noexcept;
  TrainingText& operator=(TrainingText&& o) noexcept;
  ~TrainingText();
};

/// Streams `corpus` (checked block by block, CorpusReader) into `out`: every non-blank line when
/// `sample` <= 0, else a reservoir sample of `sample` of them (Vitter's algorithm R, mt19937_64 seeded with
/// `seed`), written in corpus order. Holds only the sample. Throws DataError for a bad file (named), SaveError
/// when `out` cannot be written.
TrainingText write_training_text(const CorpusFiles& corpus, const std::filesystem::path& out, int64_t sample,
                                 uint64_t seed);

}  // namespace lm::tokenizer
