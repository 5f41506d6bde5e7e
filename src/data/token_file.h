// Token files (train.bin / val.bin): a fixed 256-byte header, then little-endian token ids of 2 bytes
// (vocab <= 65535) or 4 bytes. Read back through mmap.
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
#include <string>
#include <vector>

namespace lm::data {

inline constexpr uint32_t kTokenFileVersion = 1;
inline constexpr size_t kTokenHeaderBytes = 256;

/// Metadata stored in a token file's header.
struct TokenFileInfo {
  uint32_t version = kTokenFileVersion;
  uint32_t id_bytes = 2;
  uint64_t count = 0;
  uint32_t vocab_size = 0;
  std::string tokenizer_sha256;  ///< 64 hex chars
  std::string source_sha256;     ///< 64 hex chars
};

/// Writes ids with a header, atomically. The id width is 2 bytes when vocab_size <= 65535, else 4.
/// Throws DataError when an id is outside [0, vocab_size), SaveError when writing fails.
void write_token_file(const std::filesystem::path& path, const std::vector<int32_t>& ids, uint32_t vocab_size,
                      const std::string& tokenizer_sha256, const std::string& source_sha256);

/// Reads only the header. Throws DataError when the file is missing, too short, or not a token file.
TokenFileInfo read_token_file_info(const std::filesystem::path& path);

/// A token file mapped read-only into memory. Move-only.
class TokenFile {
 public:
  /// Maps `path` and validates the header and the file size. Throws DataError.
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
  /// Copies tokens [start, start+n) into dst as int64. REQUIRES: start + n <= size().
  void copy(uint64_t start, uint64_t n, int64_t* dst) const;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  TokenFileInfo info_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const unsigned char* ids_ = nullptr;
};

}  // namespace lm::data
