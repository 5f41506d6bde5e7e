#include "data/token_writer.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <regex>

#include <spdlog/spdlog.h>

#include "util/errors.h"
#include "util/fs.h"

namespace lm::data {
namespace fs = std::filesystem;

namespace {

const char* kHint = " Hint: check the folder's permissions and free space.";

}  // namespace

TokenWriter::TokenWriter(fs::path bin, uint32_t vocab_size, std::string tokenizer_sha256, uint64_t shard_tokens)
    : bin_(std::move(bin)), vocab_(vocab_size), width_(vocab_size <= 65535 ? 2 : 4),
      tokenizer_sha256_(std::move(tokenizer_sha256)), shard_tokens_(std::max<uint64_t>(shard_tokens, 1)) {
  std::error_code ec;
  if (bin_.has_parent_path()) fs::create_directories(bin_.parent_path(), ec);
  if (ec) {
    throw SaveError("[data] cannot create the folder of '" + bin_.string() + "': expected a writable path, got " +
                    ec.message() + "." + kHint);
  }
  // Shards a killed writer of this output left behind (STEM-00000.EXT.tmp-PID-N-HOST, its process gone).
  const std::string stem = std::regex_replace(bin_.stem().string(), std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)");
  const std::string ext = std::regex_replace(bin_.extension().string(), std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)");
  const int stale = util::remove_stale_temporaries(bin_.parent_path(), stem + R"(-\d{5})" + ext);
  if (stale > 0) spdlog::info("data: removed {} temporary shard(s) of '{}' left by a process that is gone", stale, bin_.string());
}

TokenWriter::~TokenWriter() {
  if (out_) std::fclose(out_);
  if (finished_) return;
  std::error_code ec;
  for (const auto& t : temps_) fs::remove(t, ec);
}

void TokenWriter::open_shard() {
  temps_.push_back(shard_path(bin_, temps_.size()).string() + "." + util::temp_suffix());
  shard_counts_.push_back(0);
  out_ = std::fopen(temps_.back().c_str(), "wb");
  if (!out_) throw SaveError("[data] cannot create '" + temps_.back().string() + "': " + std::strerror(errno) + "." + kHint);
  const std::string header(kTokenHeaderBytes, '\0');  // written for real by finish()
  if (std::fwrite(header.data(), 1, header.size(), out_) != header.size()) {
    throw SaveError("[data] cannot write '" + temps_.back().string() + "': " + std::strerror(errno) + "." + kHint);
  }
}

void TokenWriter::close_shard() {
  if (!out_) return;
  const bool ok = std::fflush(out_) == 0 && ::fsync(fileno(out_)) == 0;
  const bool closed = std::fclose(out_) == 0;
  out_ = nullptr;
  if (!ok || !closed) {
    throw SaveError("[data] cannot write '" + temps_.back().string() + "': " + std::strerror(errno) + "." + kHint);
  }
}

void TokenWriter::append(const int32_t* ids, size_t n) {
  while (n > 0) {
    if (!out_) open_shard();
    const size_t take = static_cast<size_t>(std::min<uint64_t>(shard_tokens_ - shard_counts_.back(), n));
    buf_.resize(take * width_);
    for (size_t i = 0; i < take; ++i) {
      const int32_t id = ids[i];
      if (id < 0 || static_cast<uint32_t>(id) >= vocab_) {
        throw DataError("[data] token id out of range at position " + std::to_string(count_ + i) + ": expected [0, " +
                        std::to_string(vocab_) + "), got " + std::to_string(id));
      }
      const uint32_t v = static_cast<uint32_t>(id);  // little-endian hosts: the low bytes come first
      std::memcpy(&buf_[width_ * i], &v, width_);
    }
    if (std::fwrite(buf_.data(), 1, buf_.size(), out_) != buf_.size()) {
      throw SaveError("[data] cannot write '" + temps_.back().string() + "': " + std::strerror(errno) + "." + kHint);
    }
    shard_counts_.back() += take;
    count_ += take;
    ids += take;
    n -= take;
    if (shard_counts_.back() == shard_tokens_) close_shard();
  }
}

TokenFileInfo TokenWriter::finish(const std::vector<tokenizer::CorpusInput>& inputs) {
  close_shard();
  if (count_ == 0) {
    throw DataError("[data] token data '" + bin_.string() + "': expected at least one token, got none. Hint: the "
                    "corpus's lines must hold text the tokenizer encodes.");
  }
  TokenFileInfo info;
  info.id_bytes = width_;
  info.count = count_;
  info.vocab_size = vocab_;
  info.tokenizer_sha256 = tokenizer_sha256_;
  info.source_sha256 = tokenizer::corpus_sha256(inputs);
  info.shards = static_cast<uint32_t>(temps_.size());
  for (size_t i = 0; i < temps_.size(); ++i) {  // each shard's real header, then fsynced
    TokenFileInfo part = info;
    part.count = shard_counts_[i];
    const std::string header = token_file_header(part);
    std::FILE* f = std::fopen(temps_[i].c_str(), "r+b");
    const bool ok = f && std::fwrite(header.data(), 1, header.size(), f) == header.size() && std::fflush(f) == 0 &&
                    ::fsync(fileno(f)) == 0;
    if (f) std::fclose(f);
    if (!ok) throw SaveError("[data] cannot write '" + temps_[i].string() + "': " + std::strerror(errno) + "." + kHint);
  }
  std::error_code ec;
  const bool single = temps_.size() == 1 && inputs.size() == 1;
  if (single) {  // the index goes first, then the file takes its place
    fs::remove(index_path(bin_), ec);
    fs::rename(temps_[0], bin_, ec);
    if (ec) throw SaveError("[data] cannot move token file to '" + bin_.string() + "': " + ec.message() + "." + kHint);
  } else {  // the index and the single file go first, then the shards move in, then the index names them
    fs::remove(index_path(bin_), ec);
    fs::remove(bin_, ec);
    std::vector<std::pair<std::string, uint64_t>> shards;
    for (size_t i = 0; i < temps_.size(); ++i) {
      fs::rename(temps_[i], shard_path(bin_, i), ec);
      if (ec) {
        throw SaveError("[data] cannot move token shard to '" + shard_path(bin_, i).string() + "': " + ec.message() +
                        "." + kHint);
      }
      shards.emplace_back(shard_path(bin_, i).filename().string(), shard_counts_[i]);
    }
    write_token_index(bin_, info, shards, inputs);
  }
  finished_ = true;
  for (size_t i = single ? 0 : temps_.size();; ++i) {  // shards of an earlier, longer output
    if (!fs::remove(shard_path(bin_, i), ec)) break;
  }
  util::fsync_dir(bin_.has_parent_path() ? bin_.parent_path() : fs::path("."));
  return info;
}

}  // namespace lm::data
