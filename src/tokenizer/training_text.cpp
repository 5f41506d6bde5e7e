#include "tokenizer/training_text.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/errors.h"

namespace lm::tokenizer {
namespace fs = std::filesystem;

int64_t tokenizer_sample_lines(const TokenizerConfig& cfg, uint64_t corpus_bytes) {
  if (cfg.max_sentences > 0) return cfg.max_sentences;
  return corpus_bytes > kAutoSampleBytes ? kAutoSampleLines : 0;
}

TrainingText::TrainingText(TrainingText&& o) noexcept
    : path(std::exchange(o.path, fs::path())), lines(o.lines), lines_seen(o.lines_seen) {}

TrainingText& TrainingText::operator=(TrainingText&& o) noexcept {
  if (this != &o) {
    std::error_code ec;
    if (!path.empty()) fs::remove(path, ec);
    path = std::exchange(o.path, fs::path());
    lines = o.lines;
    lines_seen = o.lines_seen;
  }
  return *this;
}

TrainingText::~TrainingText() {
  std::error_code ec;
  if (!path.empty()) fs::remove(path, ec);
}

TrainingText write_training_text(const CorpusFiles& corpus, const fs::path& out, int64_t sample, uint64_t seed) {
  TrainingText text;
  text.path = out;  // removed again if anything below throws
  std::ofstream o(out, std::ios::binary);
  if (!o) {
    throw SaveError("[tokenizer] cannot create the training text '" + out.string() + "': " + std::strerror(errno) +
                    ". Hint: check the folder's permissions and free space.");
  }
  CorpusReader reader(corpus);
  std::mt19937_64 rng(seed ^ 0x746f6b656e697aULL);
  std::vector<std::pair<int64_t, std::string>> kept;  // (index among non-blank lines, line)
  int64_t seen = 0;
  std::string block;
  while (reader.next(block)) {
    const std::string_view all = block;
    for (size_t pos = 0; pos < all.size();) {
      size_t end = all.find('\n', pos);
      if (end == std::string_view::npos) end = all.size();
      const std::string_view line = all.substr(pos, end - pos);
      pos = end + 1;
      if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
      if (sample <= 0) {
        o << line << '\n';
      } else if (seen < sample) {
        kept.emplace_back(seen, std::string(line));
      } else if (const auto j = static_cast<int64_t>(rng() % static_cast<uint64_t>(seen + 1)); j < sample) {
        kept[static_cast<size_t>(j)] = {seen, std::string(line)};
      }
      ++seen;
    }
  }
  std::sort(kept.begin(), kept.end());
  for (const auto& kv : kept) o << kv.second << '\n';
  o.flush();
  if (!o) throw SaveError("[tokenizer] cannot write the training text '" + out.string() + "'. Hint: is the disk full?");
  text.lines = sample <= 0 ? seen : static_cast<int64_t>(kept.size());
  text.lines_seen = seen;
  return text;
}

}  // namespace lm::tokenizer
