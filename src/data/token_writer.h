// Writing token data as it comes (data/prepare.cpp streams into it): shards of data.shard_tokens ids under
// temporary names, published at the end as the single token file or as shards and their index
// (docs/formats.md "Token files").
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "data/token_file.h"
#include "tokenizer/corpus_text.h"

namespace lm::data {

/// Writes token data as it comes, in shards of at most `shard_tokens` ids, each written to a temporary
/// file. finish() publishes it: one shard from one input as the single token file `bin`, anything else as
/// the index and its shards (the other form and stale shards are removed). Destroyed unfinished, it
/// removes its temporary files and leaves what was there before.
class TokenWriter {
 public:
  /// REQUIRES: shard_tokens >= 1. Throws SaveError when `bin`'s directory cannot be written.
  TokenWriter(std::filesystem::path bin, uint32_t vocab_size, std::string tokenizer_sha256,
              uint64_t shard_tokens = kDefaultShardTokens);
  ~TokenWriter();
  TokenWriter(const TokenWriter&) = delete;
  TokenWriter& operator=(const TokenWriter&) = delete;

  /// Appends ids. Throws DataError when one is outside [0, vocab_size), SaveError when writing fails.
  void append(const int32_t* ids, size_t n);
  uint64_t count() const { return count_; }
  /// Publishes the data made from `inputs` (in order). Throws DataError when no id was appended,
  /// SaveError when writing fails.
  TokenFileInfo finish(const std::vector<tokenizer::CorpusInput>& inputs);

 private:
  void open_shard();
  void close_shard();
  std::filesystem::path bin_;
  uint32_t vocab_, width_;
  std::string tokenizer_sha256_;
  uint64_t shard_tokens_;
  uint64_t count_ = 0;
  std::vector<std::filesystem::path> temps_;  ///< one per shard, in order
  std::vector<uint64_t> shard_counts_;
  std::FILE* out_ = nullptr;                  ///< the open shard
  std::vector<unsigned char> buf_;
  bool finished_ = false;
};

}  // namespace lm::data
