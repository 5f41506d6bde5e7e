// Token files (train.bin / val.bin): a fixed 256-byte header, then little-endian token ids of 2 bytes
// (vocab <= 65535) or 4 bytes. Read back through mmap.
//
// Token data too large for one shard, or made from several input files, is stored as shards instead:
// NAME.index.json (which shards in which order, the inputs with their sizes and SHA-256) and
// NAME-00000.bin, NAME-00001.bin, ... each a token file as below. TokenFile reads either form as one stream
// (docs/formats.md "Token files").
//
// Header layout (all little-endian):
//   0  char[8]  magic "LMTOKENS"
//   8  u32      format version (kTokenFileVersion)
//   12 u32      id width in bytes (2 or 4)
//   16 u64      token count
//   24 u32      vocab size of the tokenizer
//   28 u32      reserved (0)
//   32 char[64] SHA-256 (hex) of the tokenizer model file
//   96 char[64] SHA-256 (hex) of the source text
//   160..255    zero
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/corpus_text.h"

namespace lm::data {

inline constexpr uint32_t kTokenFileVersion = 1;
inline constexpr size_t kTokenHeaderBytes = 256;

/// Tokens per shard unless told otherwise: 256 MiB of 2-byte ids.
inline constexpr uint64_t kDefaultShardTokens = uint64_t{1} << 27;

/// Metadata stored in a token file's header (of sharded data: of the whole stream).
struct TokenFileInfo {
  uint32_t version = kTokenFileVersion;
  uint32_t id_bytes = 2;
  uint64_t count = 0;
  uint32_t vocab_size = 0;
  std::string tokenizer_sha256;  ///< 64 hex chars
  std::string source_sha256;     ///< 64 hex chars: tokenizer::corpus_sha256 of the inputs
  uint32_t shards = 1;           ///< files holding the ids (1: a single token file)
};

/// The index of sharded token data beside `bin` ("train.bin" -> "train.index.json").
std::filesystem::path index_path(const std::filesystem::path& bin);
/// Shard i of the token data `bin` ("train.bin", 3 -> "train-00003.bin").
std::filesystem::path shard_path(const std::filesystem::path& bin, size_t i);

/// The 256 header bytes of a token file described by `info`.
std::string token_file_header(const TokenFileInfo& info);

/// Writes the index of sharded data `bin` (atomically): the whole stream's `info`, its shards (file name
/// beside the index, ids) in order, and the inputs it was made from. Throws SaveError.
void write_token_index(const std::filesystem::path& bin, const TokenFileInfo& info,
                       const std::vector<std::pair<std::string, uint64_t>>& shards,
                       const std::vector<tokenizer::CorpusInput>& inputs);

/// Writes ids with a header, atomically. The id width is 2 bytes when vocab_size <= 65535, else 4.
/// Throws DataError when an id is outside [0, vocab_size), SaveError when writing fails.
void write_token_file(const std::filesystem::path& path, const std::vector<int32_t>& ids, uint32_t vocab_size,
                      const std::string& tokenizer_sha256, const std::string& source_sha256);

/// Reads only the header (of sharded data `path`, whose index is index_path(path): the index, checked
/// against its shards' headers). Throws DataError when the data is missing, too short, or not token data.
TokenFileInfo read_token_file_info(const std::filesystem::path& path);

/// True when token data exists at `path` in either form.
bool token_data_exists(const std::filesystem::path& path);

/// The inputs an index records (empty for a single token file). Throws DataError.
std::vector<tokenizer::CorpusInput> read_token_inputs(const std::filesystem::path& path);

/// Token data mapped read-only into memory: a single token file, or the shards of an index read as one
/// stream (`path` names the .bin; its index is used when the .bin itself is absent). Move-only.
class TokenFile {
 public:
  /// Maps the data and validates headers, sizes and ids. Throws DataError.
  explicit TokenFile(const std::filesystem::path& path);
  ~TokenFile();
  TokenFile(TokenFile&&) noexcept;
  TokenFile& operator=(TokenFile&&) noexcept;
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  const TokenFileInfo& info() const { return info_; }
  uint64_t size() const { return info_.count; }
  /// Token at position i. REQUIRES: i < size().
  int64_t at(uint64_t i) const;
  /// Copies tokens [start, start+n) into dst as int64, across shard boundaries. REQUIRES: start + n <= size().
  void copy(uint64_t start, uint64_t n, int64_t* dst) const;
  /// The single token file, or the index of sharded data.
  const std::filesystem::path& path() const { return path_; }

 private:
  struct Shard;
  std::filesystem::path path_;
  TokenFileInfo info_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::vector<uint64_t> starts_;  ///< first token of each shard in the stream
};

}  // namespace lm::data
