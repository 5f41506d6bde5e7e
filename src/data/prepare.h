// Corpus preparation: plain UTF-8 text (one file, or the files of a directory or glob) -> token data. Each
// non-empty line is encoded on its own and followed by the tokenizer's end-of-sequence id, so line (verse,
// paragraph) boundaries stay visible. The text is streamed in blocks of lines and encoded on several threads;
// the ids are written in input order, so the result is the same for any thread count or block size.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>

#include "data/token_file.h"
#include "data/token_writer.h"
#include "tokenizer/corpus_text.h"
#include "tokenizer/tokenizer.h"

namespace lm::data {

/// How prepare_corpus works; none of it changes the ids written.
struct PrepareOptions {
  int threads = 0;  ///< encoder threads, at most 64 (0 = auto: the usable cores, at most 8; 1 below 1 MiB of text)
  size_t block_bytes = tokenizer::kDefaultBlockBytes;  ///< text per block of lines handed to a thread
  uint64_t shard_tokens = kDefaultShardTokens;         ///< ids per shard of the output
  bool progress = true;  ///< a live line on a terminal, else a log line per 10% (corpora of 64 MiB or more)
  /// Called before each block is read; what it throws (e.g. Interrupted on Ctrl-C) ends the preparation,
  /// temporary shards removed. Empty = never stops.
  std::function<void()> check_stop;
};

/// What one prepare_corpus did (for tests and the benchmark).
struct PrepareStats {
  int threads = 0;
  uint64_t blocks = 0;            ///< blocks of lines read
  uint64_t max_blocks_alive = 0;  ///< most blocks read and not yet written at any moment (at most `threads`)
  uint64_t bytes = 0, lines = 0;
};

/// Encodes `corpus` with `tok` into the token data `out` (a single file, or shards and an index: see
/// TokenWriter), never holding more than a block of text and its ids per thread. Returns its info.
/// Throws DataError when a file is not a corpus (naming it) or the corpus yields no tokens, SaveError when
/// writing fails, or what opts.check_stop throws; a failure before the end keeps what `out` held (one while
/// publishing leaves one complete form or none).
TokenFileInfo prepare_corpus(const tokenizer::CorpusFiles& corpus, const tokenizer::Tokenizer& tok,
                             const std::filesystem::path& out, const PrepareOptions& opts = {},
                             PrepareStats* stats = nullptr);

/// True when token data exists at `out`, is valid, and was made from this corpus (every file's SHA-256)
/// with this tokenizer.
bool token_file_is_current(const tokenizer::CorpusFiles& corpus, const tokenizer::Tokenizer& tok,
                           const std::filesystem::path& out);

}  // namespace lm::data
