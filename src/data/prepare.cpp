#include "data/prepare.h"

#include <algorithm>
#include <exception>
#include <string_view>
#include <thread>
#include <vector>

#include "tokenizer/corpus_text.h"
#include "util/errors.h"
#include "util/fs.h"
#include "util/hash.h"
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

// `text` cut into at most `parts` pieces of about equal size, each ending after a newline (or at the end).
std::vector<std::string_view> split_at_lines(std::string_view text, size_t parts) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (size_t i = 1; i <= parts && start < text.size(); ++i) {
    size_t end = text.size();
    if (i < parts) {
      const size_t newline = text.find('\n', std::max(start, text.size() * i / parts));
      end = newline == std::string_view::npos ? text.size() : newline + 1;
    }
    out.push_back(text.substr(start, end - start));
    start = end;
  }
  return out;
}

constexpr int kMaxEncodeThreads = 64;

int encode_threads(int requested, size_t bytes) {
  if (requested > 0) return std::min(requested, kMaxEncodeThreads);
  if (bytes < (size_t{1} << 20)) return 1;
  return std::min(util::usable_cores(), 8);
}

// Joins every started thread when it goes out of scope, also when starting one more threw.
struct JoinAll {
  std::vector<std::thread>& threads;
  ~JoinAll() {
    for (auto& t : threads) {
      if (t.joinable()) t.join();
    }
  }
};

}  // namespace

TokenFileInfo prepare_corpus(const fs::path& corpus, const tokenizer::Tokenizer& tok, const fs::path& out,
                             int threads) {
  const std::string text = tokenizer::read_corpus(corpus, "corpus");
  const auto parts = split_at_lines(text, static_cast<size_t>(encode_threads(threads, text.size())));
  std::vector<std::vector<int32_t>> part_ids(parts.size());
  std::vector<std::exception_ptr> errors(parts.size());
  {
    std::vector<std::thread> workers;
    JoinAll join{workers};
    for (size_t i = 1; i < parts.size(); ++i) {  // part 0 on this thread
      workers.emplace_back([&, i] {
        try {
          encode_lines(parts[i], tok, part_ids[i]);
        } catch (...) {
          errors[i] = std::current_exception();
        }
      });
    }
    try {
      if (!parts.empty()) encode_lines(parts[0], tok, part_ids[0]);
    } catch (...) {
      errors[0] = std::current_exception();
    }
  }
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
  size_t count = 0;
  for (const auto& part : part_ids) count += part.size();
  std::vector<int32_t> ids;
  ids.reserve(count);
  for (auto& part : part_ids) {
    ids.insert(ids.end(), part.begin(), part.end());
    std::vector<int32_t>().swap(part);  // each part freed once copied
  }
  if (ids.empty()) {
    throw DataError("[prepare] corpus '" + corpus.string() + "' gave no tokens: expected non-empty text");
  }
  write_token_file(out, ids, static_cast<uint32_t>(tok.vocab_size()), tok.sha256(), util::sha256_hex(text));
  return read_token_file_info(out);
}

bool token_file_is_current(const fs::path& corpus, const tokenizer::Tokenizer& tok, const fs::path& out) {
  if (!fs::is_regular_file(out) || !fs::is_regular_file(corpus)) return false;
  try {
    TokenFileInfo info = read_token_file_info(out);
    return info.tokenizer_sha256 == tok.sha256() && info.vocab_size == static_cast<uint32_t>(tok.vocab_size()) &&
           info.source_sha256 == util::sha256_file(corpus);
  } catch (const DataError&) {
    return false;
  }
}

}  // namespace lm::data
