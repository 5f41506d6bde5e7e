// Corpus preparation: plain UTF-8 text -> token file. Each non-empty line is encoded on its own and
// followed by the tokenizer's end-of-sequence id, so line (verse, paragraph) boundaries stay visible.
#pragma once

#include <filesystem>

#include "data/token_file.h"
#include "tokenizer/tokenizer.h"

namespace lm::data {

/// Encodes `corpus` with `tok` into `out` (written atomically). Returns the header written. The lines are
/// split into `threads` contiguous parts encoded at once (at most 64; 0 = auto: the usable cores, at most
/// 8, for corpora of 1 MiB or more, else 1); lines are encoded independently, so the file is the same for
/// any thread count.
/// Throws DataError when the corpus is missing or yields no tokens.
TokenFileInfo prepare_corpus(const std::filesystem::path& corpus, const tokenizer::Tokenizer& tok,
                             const std::filesystem::path& out, int threads = 0);

/// True when `out` exists, is a valid token file, and was made from this corpus with this tokenizer.
bool token_file_is_current(const std::filesystem::path& corpus, const tokenizer::Tokenizer& tok,
                           const std::filesystem::path& out);

}  // namespace lm::data
