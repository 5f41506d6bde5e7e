#include "data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

#include <nlohmann/json.hpp>

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

std::string token_file_header(const TokenFileInfo& info) {
  std::string buf(kTokenHeaderBytes, '\0');
  std::memcpy(&buf[0], kMagic, 8);
  put<uint32_t>(buf, 8, kTokenFileVersion);
  put<uint32_t>(buf, 12, info.id_bytes);
  put<uint64_t>(buf, 16, info.count);
  put<uint32_t>(buf, 24, info.vocab_size);
  std::memcpy(&buf[32], info.tokenizer_sha256.data(), std::min<size_t>(64, info.tokenizer_sha256.size()));
  std::memcpy(&buf[96], info.source_sha256.data(), std::min<size_t>(64, info.source_sha256.size()));
  return buf;
}

void write_token_file(const fs::path& path, const std::vector<int32_t>& ids, uint32_t vocab_size,
                      const std::string& tokenizer_sha256, const std::string& source_sha256) {
  const uint32_t width = vocab_size <= 65535 ? 2 : 4;
  TokenFileInfo info;
  info.id_bytes = width;
  info.count = ids.size();
  info.vocab_size = vocab_size;
  info.tokenizer_sha256 = tokenizer_sha256;
  info.source_sha256 = source_sha256;
  std::string buf = token_file_header(info);
  buf.resize(kTokenHeaderBytes + ids.size() * width, '\0');
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

fs::path index_path(const fs::path& bin) { return bin.parent_path() / (bin.stem().string() + ".index.json"); }

fs::path shard_path(const fs::path& bin, size_t i) {
  char num[16];
  std::snprintf(num, sizeof num, "-%05zu", i);
  return bin.parent_path() / (bin.stem().string() + num + bin.extension().string());
}

namespace {

constexpr const char* kIndexFormat = "lmtrain-token-shards";
constexpr int kIndexVersion = 1;

TokenFileInfo read_single_info(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw DataError("[data] token file missing: expected a file at '" + path.string() + "'");
  unsigned char h[kTokenHeaderBytes] = {};
  in.read(reinterpret_cast<char*>(h), kTokenHeaderBytes);
  std::error_code ec;
  auto bytes = fs::file_size(path, ec);
  return parse_header(h, ec ? 0 : bytes, path);
}

// A sharded data set's index, parsed and checked for shape; its shard files are checked by the caller.
struct Index {
  TokenFileInfo info;
  std::vector<std::pair<std::string, uint64_t>> shards;  // file name (beside the index), tokens
  std::vector<tokenizer::CorpusInput> inputs;
};

Index read_index(const fs::path& index) {
  auto bad = [&](const std::string& what) {
    return DataError("[data] token index '" + index.string() + "' " + what +
                     ". Hint: regenerate it with `lmtrain prepare` (or delete it: a run remakes its token data).");
  };
  Index out;
  try {
    const auto j = nlohmann::json::parse(util::read_file(index, "token index"));
    if (j.value("format", "") != kIndexFormat) throw bad("is not a token index: expected format " + std::string(kIndexFormat));
    if (j.at("version").get<int>() != kIndexVersion) {
      throw bad("has version " + j.at("version").dump() + ", expected " + std::to_string(kIndexVersion));
    }
    out.info.id_bytes = j.at("id_bytes").get<uint32_t>();
    out.info.count = j.at("tokens").get<uint64_t>();
    out.info.vocab_size = j.at("vocab_size").get<uint32_t>();
    out.info.tokenizer_sha256 = j.at("tokenizer_sha256").get<std::string>();
    out.info.source_sha256 = j.at("source_sha256").get<std::string>();
    uint64_t sum = 0;
    for (const auto& s : j.at("shards")) {
      const auto name = s.at("file").get<std::string>();
      if (name.empty() || name.find('/') != std::string::npos) throw bad("names shard '" + name + "' outside its folder");
      out.shards.emplace_back(name, s.at("tokens").get<uint64_t>());
      sum += out.shards.back().second;
    }
    for (const auto& in : j.at("inputs")) {
      out.inputs.push_back({in.at("path").get<std::string>(), in.at("bytes").get<uint64_t>(),
                            in.at("sha256").get<std::string>()});
    }
    if (out.shards.empty() || sum != out.info.count) {
      throw bad("lists " + std::to_string(out.shards.size()) + " shards holding " + std::to_string(sum) +
                " tokens: expected at least one, holding its total of " + std::to_string(out.info.count));
    }
  } catch (const nlohmann::json::exception& e) {
    throw bad(std::string("cannot be read as JSON: ") + e.what());
  }
  out.info.shards = static_cast<uint32_t>(out.shards.size());
  return out;
}

// Throws unless a shard's header agrees with its index.
void check_shard(const TokenFileInfo& shard, uint64_t tokens, const TokenFileInfo& whole, const fs::path& path) {
  if (shard.count != tokens || shard.vocab_size != whole.vocab_size || shard.id_bytes != whole.id_bytes ||
      shard.tokenizer_sha256 != whole.tokenizer_sha256 || shard.source_sha256 != whole.source_sha256) {
    throw DataError("[data] token shard '" + path.string() + "' does not belong to its index: expected " +
                    std::to_string(tokens) + " tokens of vocab " + std::to_string(whole.vocab_size) +
                    " from the same tokenizer and corpus, got " + std::to_string(shard.count) + " tokens of vocab " +
                    std::to_string(shard.vocab_size) + ". Hint: regenerate it with `lmtrain prepare`.");
  }
}

}  // namespace

bool token_data_exists(const fs::path& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) || fs::is_regular_file(index_path(path), ec);
}

TokenFileInfo read_token_file_info(const fs::path& path) {
  std::error_code ec;
  if (fs::exists(path, ec) || !fs::exists(index_path(path), ec)) return read_single_info(path);
  const Index index = read_index(index_path(path));
  for (size_t i = 0; i < index.shards.size(); ++i) {
    const fs::path shard = path.parent_path() / index.shards[i].first;
    check_shard(read_single_info(shard), index.shards[i].second, index.info, shard);
  }
  return index.info;
}

std::vector<tokenizer::CorpusInput> read_token_inputs(const fs::path& path) {
  std::error_code ec;
  if (fs::exists(path, ec) || !fs::exists(index_path(path), ec)) return {};
  return read_index(index_path(path)).inputs;
}

void write_token_index(const fs::path& bin, const TokenFileInfo& info,
                       const std::vector<std::pair<std::string, uint64_t>>& shards,
                       const std::vector<tokenizer::CorpusInput>& inputs) {
  nlohmann::json js = nlohmann::json::array(), ins = nlohmann::json::array();
  for (const auto& [file, tokens] : shards) js.push_back({{"file", file}, {"tokens", tokens}});
  for (const auto& in : inputs) ins.push_back({{"path", in.path.string()}, {"bytes", in.bytes}, {"sha256", in.sha256}});
  const nlohmann::json j = {{"format", kIndexFormat},          {"version", kIndexVersion},
                            {"tokens", info.count},            {"id_bytes", info.id_bytes},
                            {"vocab_size", info.vocab_size},   {"tokenizer_sha256", info.tokenizer_sha256},
                            {"source_sha256", info.source_sha256}, {"shards", js}, {"inputs", ins}};
  util::atomic_write_file(index_path(bin), j.dump(1) + "\n");
}

// One mapped token file.
struct TokenFile::Shard {
  fs::path path;
  TokenFileInfo info;
  void* map = nullptr;
  size_t map_bytes = 0;
  const unsigned char* ids = nullptr;

  explicit Shard(const fs::path& p) : path(p) {
    int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw DataError("[data] token file missing: expected a file at '" + p.string() + "'");
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      throw DataError("[data] cannot stat '" + p.string() + "'");
    }
    map_bytes = static_cast<size_t>(st.st_size);
    if (map_bytes > 0) map = ::mmap(nullptr, map_bytes, PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (map == MAP_FAILED || map == nullptr) {
      map = nullptr;
      throw DataError("[data] token file '" + p.string() + "' is empty or cannot be mapped");
    }
    try {
      info = parse_header(static_cast<const unsigned char*>(map), map_bytes, p);
      ids = static_cast<const unsigned char*>(map) + kTokenHeaderBytes;
      // One pass over the ids (a few ms for the King James Bible): an id outside the vocabulary would
      // otherwise reach the embedding lookup as an out-of-range index.
      for (uint64_t i = 0; i < info.count; ++i) {
        if (const int64_t id = at(i); id >= info.vocab_size) {
          throw DataError("[data] token file '" + p.string() + "' holds id " + std::to_string(id) + " at position " +
                          std::to_string(i) + ": expected ids below its vocab size " + std::to_string(info.vocab_size) +
                          ". Hint: regenerate it with `lmtrain prepare`.");
        }
      }
    } catch (...) {
      ::munmap(map, map_bytes);
      throw;
    }
  }
  ~Shard() { ::munmap(map, map_bytes); }
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  int64_t at(uint64_t i) const { return info.id_bytes == 2 ? get<uint16_t>(ids, 2 * i) : get<uint32_t>(ids, 4 * i); }
};

TokenFile::TokenFile(const fs::path& path) : path_(path) {
  std::error_code ec;
  if (fs::exists(path, ec) || !fs::exists(index_path(path), ec)) {
    shards_.push_back(std::make_unique<Shard>(path));
    info_ = shards_.front()->info;
    starts_ = {0};
    return;
  }
  path_ = index_path(path);
  const Index index = read_index(path_);
  info_ = index.info;
  uint64_t start = 0;
  for (const auto& [name, tokens] : index.shards) {
    shards_.push_back(std::make_unique<Shard>(path.parent_path() / name));
    check_shard(shards_.back()->info, tokens, info_, shards_.back()->path);
    starts_.push_back(start);
    start += tokens;
  }
}

TokenFile::~TokenFile() = default;
TokenFile::TokenFile(TokenFile&&) noexcept = default;
TokenFile& TokenFile::operator=(TokenFile&&) noexcept = default;

int64_t TokenFile::at(uint64_t i) const {
  const size_t s = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), i) - starts_.begin()) - 1;
  return shards_[s]->at(i - starts_[s]);
}

void TokenFile::copy(uint64_t start, uint64_t n, int64_t* dst) const {
  size_t s = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), start) - starts_.begin()) - 1;
  while (n > 0) {  // the part in shard s, then on into the next shard
    const Shard& shard = *shards_[s];
    const uint64_t off = start - starts_[s];
    const uint64_t take = std::min(n, shard.info.count - off);
    for (uint64_t k = 0; k < take; ++k) dst[k] = shard.at(off + k);
    dst += take;
    start += take;
    n -= take;
    ++s;
  }
}

}  // namespace lm::data
