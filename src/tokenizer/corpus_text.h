// Reading a training or validation corpus: the one place that decides what counts as text. A corpus must
// be a readable regular file of valid UTF-8 without NUL bytes, with at least one non-blank line and no
// line over kMaxLineBytes. Anything else is refused (exit 3) with the file, line and column of the first
// problem, before SentencePiece or the encoder sees it (docs/errors.md "What counts as a corpus").
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

namespace lm::tokenizer {

/// Longest line accepted: lines are the units of training (docs/errors.md "What counts as a corpus"), and a longer one
/// is almost always a file without line breaks.
inline constexpr size_t kMaxLineBytes = size_t{1} << 20;

/// Checks that `path` names a readable regular file (not a directory, FIFO or device). `role` names it in
/// the message ("training corpus", "corpus"). Throws DataError.
void check_corpus_file(const std::filesystem::path& path, std::string_view role);

/// Throws DataError naming `path`, line and column of the first invalid UTF-8 sequence, NUL byte or
/// over-long line of `text`, or saying that it holds no non-blank line.
void check_corpus_text(std::string_view text, const std::filesystem::path& path);

/// check_corpus_file, then the whole file read and checked with check_corpus_text.
std::string read_corpus(const std::filesystem::path& path, std::string_view role);

}  // namespace lm::tokenizer
