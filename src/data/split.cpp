#include "data/split.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <tuple>

#include "tokenizer/corpus_text.h"
#include "util/errors.h"
#include "util/text.h"
#include "util/fs.h"
#include "util/hash.h"

namespace lm::data {
namespace fs = std::filesystem;

namespace {

constexpr int64_t kLinesPerBlock = 25;  // a block shorter than this is a handful of verses, not a passage
constexpr int64_t kMaxBlocks = 16;

// Where each line starts, plus one past the end of the last (a final line without '\n' counts).
std::vector<size_t> line_starts(const std::string& text) {
  std::vector<size_t> starts{0};
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n') starts.push_back(i + 1);
  }
  if (starts.back() != text.size()) starts.push_back(text.size());
  return starts;
}

bool has_text(std::string_view s) { return s.find_first_not_of(" \t\r\n") != std::string_view::npos; }

}  // namespace

CorpusSplit split_corpus(const SplitSpec& spec) {
  if (!(spec.fraction > 0.0 && spec.fraction <= 0.5)) {
    throw ConfigError("[data] val_fraction: expected a value in (0, 0.5], got " + util::as_written(spec.fraction));
  }
  const std::string text = tokenizer::read_corpus(spec.source, "training corpus");
  const std::vector<size_t> starts = line_starts(text);
  const int64_t n = static_cast<int64_t>(starts.size()) - 1;
  if (n < 2) {
    throw DataError("[data] holding out validation lines of '" + spec.source.string() + "': expected at least 2 lines, got " +
                    std::to_string(n) + ". Hint: set data.val to a validation text file.");
  }
  CorpusSplit s;
  s.lines = n;
  s.source_sha256 = util::sha256_hex(text);
  s.val_lines = std::clamp<int64_t>(std::llround(spec.fraction * static_cast<double>(n)), 1, n - 1);
  const int64_t k = std::clamp<int64_t>(s.val_lines / kLinesPerBlock, 1, kMaxBlocks);
  // mt19937_64's sequence is fixed by the standard (a distribution's is not): the offsets are reduced by hand.
  std::mt19937_64 rng(spec.seed ^ 0x76616c5f73706c69ULL);  // "val_spli": not the stream model init draws from
  for (int64_t b = 0; b < k; ++b) {
    const int64_t seg_begin = n * b / k, seg_end = n * (b + 1) / k;
    const int64_t len = std::min(s.val_lines * (b + 1) / k - s.val_lines * b / k, seg_end - seg_begin);
    const int64_t room = seg_end - seg_begin - len + 1;
    const int64_t begin = seg_begin + static_cast<int64_t>(rng() % static_cast<uint64_t>(room));
    if (len > 0) s.held_out.push_back({begin, begin + len});
  }
  s.val_lines = 0;
  size_t next = 0;  // next held-out block
  for (int64_t i = 0; i < n; ++i) {
    while (next < s.held_out.size() && s.held_out[next].end <= i) ++next;
    const bool val = next < s.held_out.size() && s.held_out[next].begin <= i;
    std::string& out = val ? s.val : s.train;
    out.append(text, starts[i], starts[i + 1] - starts[i]);
    if (out.back() != '\n') out.push_back('\n');
    s.val_lines += val ? 1 : 0;
  }
  if (!has_text(s.val) || !has_text(s.train)) {
    throw DataError("[data] holding out validation lines of '" + spec.source.string() + "': expected text on both sides, got " +
                    (has_text(s.val) ? "only blank training lines" : "only blank held-out lines") +
                    ". Hint: change data.val_fraction or run.seed, or set data.val to a validation text file.");
  }
  s.train_sha256 = util::sha256_hex(s.train);
  s.val_sha256 = util::sha256_hex(s.val);
  return s;
}

std::string describe_split(const CorpusSplit& split, const fs::path& source) {
  char head[160];
  std::snprintf(head, sizeof head, "held out %lld of %lld lines (%.1f%%) as validation, %zu block%s: lines ",
                static_cast<long long>(split.val_lines), static_cast<long long>(split.lines),
                100.0 * static_cast<double>(split.val_lines) / static_cast<double>(split.lines), split.held_out.size(),
                split.held_out.size() == 1 ? "" : "s");
  std::string out = "'" + source.string() + "': " + head;
  for (size_t i = 0; i < split.held_out.size(); ++i) {
    if (i == 4 && split.held_out.size() > 5) {
      out += ", ... (" + std::to_string(split.held_out.size() - 4) + " more)";
      break;
    }
    // 1-based and inclusive, as an editor numbers lines
    out += (i ? ", " : "") + std::to_string(split.held_out[i].begin + 1) + "-" + std::to_string(split.held_out[i].end);
  }
  return out;
}

void write_split(const CorpusSplit& split, const fs::path& train_out, const fs::path& val_out) {
  for (auto [path, bytes, sha] : {std::tuple{&train_out, &split.train, &split.train_sha256},
                                   std::tuple{&val_out, &split.val, &split.val_sha256}}) {
    if (fs::is_regular_file(*path) && util::sha256_file(*path) == *sha) continue;
    util::atomic_write_file(*path, *bytes);
  }
}

FileSplit hold_out_files(const std::vector<fs::path>& files, double fraction, uint64_t seed) {
  const size_t n = files.size();
  const size_t k = std::min(n - 1, std::max<size_t>(1, static_cast<size_t>(std::llround(fraction * n))));
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::mt19937_64 rng(seed ^ 0x686f6c646f7574ULL);
  for (size_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng() % (i + 1)]);  // Fisher-Yates, own draws
  std::vector<bool> held(n, false);
  for (size_t i = 0; i < k; ++i) held[order[i]] = true;
  FileSplit out;
  for (size_t i = 0; i < n; ++i) (held[i] ? out.val : out.train).push_back(files[i]);
  return out;
}

}  // namespace lm::data
