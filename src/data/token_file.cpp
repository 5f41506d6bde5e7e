#include "data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <utility>

#include "util/errors.h"
#include "util/fs.h"

namespace lm::data {
namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'L', 'M', 'T', 'O', 'K', 'E', 'N', 'S'};

template <typename T>
void put(std::string& buf, size_t off, T v) {
  std::memcpy(&buf[off], &v, sizeof(T));  // x86/ARM hosts are little-endian
}
template <typename T>
T get(const unsigned char* p, size_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof(T));
  return v;
}

TokenFileInfo parse_header(const unsigned char* h, size_t file_bytes, const fs::path& path) {
  auto bad = [&](const std::string& what) {
    return DataError("[data] token file '" + path.string() + "' " + what +
                     ". Hint: regenerate it with `lmtrain prepare`.");
  };
  if (file_bytes < kTokenHeaderBytes) throw bad("is too short for a header");
  if (std::memcmp(h, kMagic, 8) != 0) throw bad("has the wrong magic: expected LMTOKENS");
  TokenFileInfo info;
  info.version = get<uint32_t>(h, 8);
  if (info.version != kTokenFileVersion) {
    throw bad("has format version " + std::to_string(info.version) + ", expected " + std::to_string(kTokenFileVersion) +
              (info.version > kTokenFileVersion ? " (written by a newer lmtrain)" : ""));
  }
  info.id_bytes = get<uint32_t>(h, 12);
  info.count = get<uint64_t>(h, 16);
  info.vocab_size = get<uint32_t>(h, 24);
  const uint32_t width = info.vocab_size <= 65535 ? 2 : 4;
  if (info.vocab_size == 0 || info.id_bytes != width) {
    throw bad("has id width " + std::to_string(info.id_bytes) + " for vocab size " + std::to_string(info.vocab_size) +
              ": expected a vocab size >= 1 and width " + std::to_string(width));
  }
  info.tokenizer_sha256.assign(reinterpret_cast<const char*>(h + 32), 64);
  info.source_sha256.assign(reinterpret_cast<const char*>(h + 96), 64);
  // Compared as counts, not bytes, so that a huge count cannot wrap around to a matching size.
  const uint64_t held = (file_bytes - kTokenHeaderBytes) / info.id_bytes;
  if (info.count != held || (file_bytes - kTokenHeaderBytes) % info.id_bytes != 0) {
    throw bad("is truncated or padded: its header says " + std::to_string(info.count) + " tokens, its size of " +
              std::to_string(file_bytes) + " bytes holds " + std::to_string(held));
  }
  return info;
}

}  // namespace

void write_token_file(const fs::path& path, const std::vector<int32_t>& ids, uint32_t vocab_size,
                      const std::string& tokenizer_sha256, const std::string& source_sha256) {
  const uint32_t width = vocab_size <= 65535 ? 2 : 4;
  std::string buf(kTokenHeaderBytes + ids.size() * width, '\0');
  std::memcpy(&buf[0], kMagic, 8);
  put<uint32_t>(buf, 8, kTokenFileVersion);
  put<uint32_t>(buf, 12, width);
  put<uint64_t>(buf, 16, ids.size());
  put<uint32_t>(buf, 24, vocab_size);
  std::memcpy(&buf[32], tokenizer_sha256.data(), std::min<size_t>(64, tokenizer_sha256.size()));
  std::memcpy(&buf[96], source_sha256.data(), std::min<size_t>(64, source_sha256.size()));
  char* out = &buf[kTokenHeaderBytes];
  for (size_t i = 0; i < ids.size(); ++i) {
    int32_t id = ids[i];
    if (id < 0 || static_cast<uint32_t>(id) >= vocab_size) {
      throw DataError("[data] token id out of range at position " + std::to_string(i) + ": expected [0, " +
                      std::to_string(vocab_size) + "), got " + std::to_string(id));
    }
    if (width == 2) {
      uint16_t v = static_cast<uint16_t>(id);
      std::memcpy(out + 2 * i, &v, 2);
    } else {
      uint32_t v = static_cast<uint32_t>(id);
      std::memcpy(out + 4 * i, &v, 4);
    }
  }
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  util::atomic_write_file(path, buf);
}

TokenFileInfo read_token_file_info(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError("[data] token file missing: expected a file at '" + path.string() + "'");
  unsigned char h[kTokenHeaderBytes] = {};
  in.read(reinterpret_cast<char*>(h), kTokenHeaderBytes);
  std::error_code ec;
  auto bytes = fs::file_size(path, ec);
  return parse_header(h, ec ? 0 : bytes, path);
}

TokenFile::TokenFile(const fs::path& path) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw DataError("[data] token file missing: expected a file at '" + path.string() + "'");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw DataError("[data] cannot stat '" + path.string() + "'");
  }
  map_bytes_ = static_cast<size_t>(st.st_size);
  if (map_bytes_ > 0) map_ = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map_ == MAP_FAILED || map_ == nullptr) {
    map_ = nullptr;
    throw DataError("[data] token file '" + path.string() + "' is empty or cannot be mapped");
  }
  try {
    info_ = parse_header(static_cast<const unsigned char*>(map_), map_bytes_, path);
    ids_ = static_cast<const unsigned char*>(map_) + kTokenHeaderBytes;
    // One pass over the ids (a few ms for the King James Bible): an id outside the vocabulary would otherwise
    // reach the embedding lookup as an out-of-range index.
    for (uint64_t i = 0; i < info_.count; ++i) {
      if (const int64_t id = at(i); id >= info_.vocab_size) {
        throw DataError("[data] token file '" + path.string() + "' holds id " + std::to_string(id) + " at position " +
                        std::to_string(i) + ": expected ids below its vocab size " + std::to_string(info_.vocab_size) +
                        ". Hint: regenerate it with `lmtrain prepare`.");
      }
    }
  } catch (...) {
    ::munmap(map_, map_bytes_);
    map_ = nullptr;
    ids_ = nullptr;
    throw;
  }
}

TokenFile::~TokenFile() {
  if (map_) ::munmap(map_, map_bytes_);
}

TokenFile::TokenFile(TokenFile&& o) noexcept
    : path_(std::move(o.path_)), info_(std::move(o.info_)), map_(o.map_), map_bytes_(o.map_bytes_), ids_(o.ids_) {
  o.map_ = nullptr;
  o.ids_ = nullptr;
}

TokenFile& TokenFile::operator=(TokenFile&& o) noexcept {
  if (this != &o) {
    if (map_) ::munmap(map_, map_bytes_);
    path_ = std::move(o.path_);
    info_ = std::move(o.info_);
    map_ = o.map_;
    map_bytes_ = o.map_bytes_;
    ids_ = o.ids_;
    o.map_ = nullptr;
    o.ids_ = nullptr;
  }
  return *this;
}

int64_t TokenFile::at(uint64_t i) const {
  if (info_.id_bytes == 2) return get<uint16_t>(ids_, 2 * i);
  return get<uint32_t>(ids_, 4 * i);
}

void TokenFile::copy(uint64_t start, uint64_t n, int64_t* dst) const {
  for (uint64_t k = 0; k < n; ++k) dst[k] = at(start + k);
}

}  // namespace lm::data
