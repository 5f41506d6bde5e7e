// SHA-256 (OpenSSL) of bytes and files, as lowercase hex.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

namespace lm::util {

/// Lowercase hex of raw bytes, and back (from_hex REQUIRES: even length, [0-9a-f] only).
std::string to_hex(const void* data, size_t n);
std::string from_hex(std::string_view hex);

/// SHA-256 fed piece by piece (a corpus read in blocks). Move-only.
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  void update(const void* p, size_t n);
  /// The digest as 64 lowercase hex characters. REQUIRES: called once; no update() after it.
  std::string hex();

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

/// SHA-256 of `bytes` as 64 lowercase hex characters.
std::string sha256_hex(std::string_view bytes);

/// SHA-256 of a file's contents, streamed. Throws DataError when unreadable.
std::string sha256_file(const std::filesystem::path& path);

}  // namespace lm::util
