#include "data/prepare.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "util/errors.h"
#include "util/threads.h"

namespace lm::data {
namespace fs = std::filesystem;

namespace {

// Appends the ids of every non-blank line of `text`, each followed by `eos` (when the tokenizer has one).
void encode_lines(std::string_view text, const tokenizer::Tokenizer& tok, std::vector<int32_t>& ids) {
  const int32_t eos = tok.eos_id();
  ids.reserve(text.size() / 3);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") != std::string_view::npos) {
      auto piece_ids = tok.encode(line);
      ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
      if (eos >= 0) ids.push_back(eos);
    }
    pos = end + 1;
  }
}

constexpr int kMaxEncodeThreads = 64;
constexpr uint64_t kLogProgressBytes = uint64_t{64} << 20;

int encode_threads(int requested, uint64_t bytes) {
  if (requested > 0) return std::min(requested, kMaxEncodeThreads);
  if (bytes < (uint64_t{1} << 20)) return 1;
  return std::min(util::usable_cores(), 8);
}

// Progress of one prepare: a live line on a terminal (stderr), else a log line at every 10% of a large corpus.
class Progress {
 public:
  Progress(bool enabled, uint64_t total) : total_(total), live_(enabled && ::isatty(STDERR_FILENO)),
                                           logged_(enabled && !live_ && total >= kLogProgressBytes) {}
  ~Progress() {
    if (live_ && drawn_) std::fputc('\n', stderr);
  }
  void update(uint64_t bytes, uint64_t lines) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    const double mb = bytes / 1e6, rate = s > 0 ? mb / s : 0.0;
    const double eta = rate > 0 ? (total_ / 1e6 - mb) / rate : 0.0;
    if (live_ && (s - last_ >= 0.25 || bytes == total_)) {
      std::fprintf(stderr, "\r[prepare] %.1f / %.1f MB  %.1f MB/s  %.0fk lines/s  ETA %.0fs   ", mb, total_ / 1e6, rate,
                   s > 0 ? lines / s / 1e3 : 0.0, std::max(0.0, eta));
      std::fflush(stderr);
      drawn_ = true;
      last_ = s;
    }
    if (logged_ && total_ > 0 && bytes * 10 / total_ > tenths_) {
      tenths_ = bytes * 10 / total_;
      spdlog::info("prepare: {}% ({:.1f} of {:.1f} MB, {:.1f} MB/s, {} lines, ETA {:.0f}s)", tenths_ * 10, mb,
                   total_ / 1e6, rate, lines, std::max(0.0, eta));
    }
  }

 private:
  uint64_t total_;
  bool live_, logged_, drawn_ = false;
  uint64_t tenths_ = 0;
  double last_ = -1.0;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

// The encoding pipeline: each thread takes the next block from the reader (in turn), encodes it, and
// appends its ids when every earlier block has been appended. A thread holds one block at a time, so at
// most `threads` blocks are alive.
class Pipeline {
 public:
  Pipeline(tokenizer::CorpusReader& reader, const tokenizer::Tokenizer& tok, TokenWriter& writer, Progress& progress,
           std::function<void()> check_stop)
      : reader_(reader), tok_(tok), writer_(writer), progress_(progress), check_stop_(std::move(check_stop)) {}

  void run(int threads, PrepareStats& stats) {
    std::vector<std::thread> workers;
    for (int i = 1; i < threads; ++i) {
      try {
        workers.emplace_back([this] { work(); });
      } catch (...) {  // could not start a thread: stop the others, then report it
        fail(std::current_exception());
        break;
      }
    }
    work();  // this thread too
    for (auto& t : workers) t.join();
    if (error_) std::rethrow_exception(error_);
    stats.blocks = next_read_;
    stats.max_blocks_alive = max_alive_;
  }

 private:
  void fail(std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(write_mu_);
    if (!error_) error_ = e;
    failed_ = true;
    turn_.notify_all();
  }

  void work() {
    try {
      std::string block;
      std::vector<int32_t> ids;
      for (;;) {
        uint64_t seq = 0, bytes = 0, lines = 0;  // bytes and lines read up to the end of this block
        {
          std::lock_guard<std::mutex> lock(read_mu_);
          if (check_stop_) check_stop_();
          if (failed_ || !reader_.next(block)) return;
          seq = next_read_++;
          bytes = reader_.bytes_read();
          lines = reader_.lines_read();
          std::lock_guard<std::mutex> count(write_mu_);
          max_alive_ = std::max(max_alive_, ++alive_);
        }
        ids.clear();
        encode_lines(block, tok_, ids);
        std::unique_lock<std::mutex> lock(write_mu_);
        turn_.wait(lock, [&] { return failed_ || next_write_ == seq; });
        if (failed_) return;
        writer_.append(ids.data(), ids.size());
        ++next_write_;
        --alive_;
        progress_.update(bytes, lines);
        turn_.notify_all();
      }
    } catch (...) {
      fail(std::current_exception());
    }
  }

  tokenizer::CorpusReader& reader_;
  const tokenizer::Tokenizer& tok_;
  TokenWriter& writer_;
  Progress& progress_;
  std::function<void()> check_stop_;
  std::mutex read_mu_, write_mu_;  // read_mu_ before write_mu_ when both are held; failed_ under write_mu_
  std::condition_variable turn_;
  uint64_t next_read_ = 0, next_write_ = 0, alive_ = 0, max_alive_ = 0;
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;
};

}  // namespace

TokenFileInfo prepare_corpus(const tokenizer::CorpusFiles& corpus, const tokenizer::Tokenizer& tok,
                             const fs::path& out, const PrepareOptions& opts, PrepareStats* stats) {
  tokenizer::CorpusReader reader(corpus, opts.block_bytes);
  TokenWriter writer(out, static_cast<uint32_t>(tok.vocab_size()), tok.sha256(), opts.shard_tokens);
  PrepareStats local;
  local.threads = encode_threads(opts.threads, reader.total_bytes());
  {
    Progress progress(opts.progress, reader.total_bytes());
    Pipeline(reader, tok, writer, progress, opts.check_stop).run(local.threads, local);
  }
  if (writer.count() == 0) {
    throw DataError("[prepare] corpus " + tokenizer::describe_files(corpus) + " gave no tokens: expected non-empty text");
  }
  local.bytes = reader.bytes_read();
  local.lines = reader.lines_read();
  if (stats) *stats = local;
  return writer.finish(reader.inputs());
}

bool token_file_is_current(const tokenizer::CorpusFiles& corpus, const tokenizer::Tokenizer& tok, const fs::path& out) {
  if (!token_data_exists(out)) return false;
  for (const auto& f : corpus) {
    if (!fs::is_regular_file(f)) return false;
  }
  try {
    TokenFileInfo info = read_token_file_info(out);
    return info.tokenizer_sha256 == tok.sha256() && info.vocab_size == static_cast<uint32_t>(tok.vocab_size()) &&
           info.source_sha256 == tokenizer::corpus_sha256(tokenizer::hash_corpus(corpus));
  } catch (const DataError&) {
    return false;
  }
}

}  // namespace lm::data
