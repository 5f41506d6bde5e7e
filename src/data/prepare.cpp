#include "data/prepare.h"

#include <string_view>

#include "tokenizer/corpus_text.h"
#include "util/errors.h"
#include "util/fs.h"
#include "util/hash.h"

namespace lm::data {
namespace fs = std::filesystem;

TokenFileInfo prepare_corpus(const fs::path& corpus, const tokenizer::Tokenizer& tok, const fs::path& out) {
  const std::string text = tokenizer::read_corpus(corpus, "corpus");
  const int32_t eos = tok.eos_id();
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") != std::string_view::npos) {
      auto piece_ids = tok.encode(line);
      ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
      if (eos >= 0) ids.push_back(eos);
    }
    pos = end + 1;
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
