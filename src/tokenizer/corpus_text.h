// Reading a training or validation corpus: the one place that decides what counts as text. A corpus is one
// file, a directory or a glob pattern (list_corpus_files); each of its files must be a readable regular file
// of valid UTF-8 without NUL bytes, with at least one non-blank line and no line over kMaxLineBytes. Anything
// else is refused (exit 3) with the file, line and column of the first problem, before SentencePiece or the
// encoder sees it (docs/errors.md "What counts as a corpus"). CorpusReader streams a corpus in blocks of
// whole lines, so no caller needs to hold a whole corpus in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "util/hash.h"

namespace lm::tokenizer {

/// Longest line accepted: lines are the units of training (docs/errors.md "What counts as a corpus"), and a longer one
/// is almost always a file without line breaks.
inline constexpr size_t kMaxLineBytes = size_t{1} << 20;

/// The files of one corpus, in reading order.
using CorpusFiles = std::vector<std::filesystem::path>;

/// The files `spec` names (docs/training.md "Many files and large corpora"): a file; a directory (every regular file below it,
/// recursively, sorted by path, names starting with '.' skipped with their folders); or a glob pattern
/// (`*`, `?`, `[...]`, matched by glob(3), sorted; a matched directory counts as its files). Each file is
/// checked with check_corpus_file. `role` names the corpus in messages. Throws DataError when a path is
/// missing or unreadable, or when a directory or pattern yields no file.
CorpusFiles list_corpus_files(const std::string& spec, std::string_view role);

/// True when `spec` holds a glob character (`*`, `?`, `[`): list_corpus_files matches it unless a path of
/// that very name exists.
bool is_glob_pattern(const std::string& spec);

/// The files' sizes added up (a missing file counts 0).
uint64_t corpus_bytes(const CorpusFiles& corpus);

/// "'a.txt'", or "'dir/a.txt' and 4 more files" for a log line.
std::string describe_files(const CorpusFiles& files);

/// One file of a corpus as read: its size and SHA-256.
struct CorpusInput {
  std::filesystem::path path;
  uint64_t bytes = 0;
  std::string sha256;  ///< 64 hex characters
};

/// Every file's size and SHA-256 (streamed). Throws DataError when one is unreadable.
std::vector<CorpusInput> hash_corpus(const CorpusFiles& files);

/// The corpus's identity, what token files, tokenizer sidecars and checkpoints record: a single file's
/// SHA-256 (so a one-file corpus is recorded as it always was), else the SHA-256 of one line
/// "SHA256  PATH\n" per file in order, PATH relative to the files' common folder (however the folder was
/// spelled): a changed, added, removed or renamed file changes it.
std::string corpus_sha256(const std::vector<CorpusInput>& inputs);

/// Bytes of text in one block of CorpusReader unless told otherwise.
inline constexpr size_t kDefaultBlockBytes = size_t{4} << 20;

/// Reads a corpus file by file in blocks of whole lines and checks each block as check_corpus_text does
/// (the file, line and column of a problem are the file's own; a file without a non-blank line is refused
/// at its end). Holds one block and the start of the next line at a time. Also hashes every file on the way.
class CorpusReader {
 public:
  /// REQUIRES: block_bytes >= 1. Nothing is read before the first next().
  explicit CorpusReader(CorpusFiles files, size_t block_bytes = kDefaultBlockBytes);
  /// The next block: whole lines of one file, about block_bytes long (longer when a line is), each line
  /// ending in '\n' except perhaps a file's last. False when every file was read. Throws DataError.
  bool next(std::string& block);
  uint64_t total_bytes() const { return total_bytes_; }  ///< of every file, from their sizes at the start
  uint64_t bytes_read() const { return bytes_read_; }
  uint64_t lines_read() const { return lines_read_; }
  /// Every file read so far with its size and SHA-256: the whole corpus once next() returned false.
  const std::vector<CorpusInput>& inputs() const { return inputs_; }

 private:
  void open_next_file();
  void finish_file();
  CorpusFiles files_;
  size_t block_bytes_;
  size_t file_ = 0;                ///< index of the open file
  std::ifstream in_;
  std::string carry_;              ///< the start of a line that the previous block cut
  size_t line_ = 1;                ///< the open file's line number at the start of carry_
  bool any_text_ = false;          ///< the open file had a non-blank line so far
  util::Sha256 sha_;
  uint64_t file_bytes_ = 0;
  uint64_t total_bytes_ = 0, bytes_read_ = 0, lines_read_ = 0;
  std::vector<CorpusInput> inputs_;
};

/// Checks that `path` names a readable regular file (not a directory, FIFO or device). `role` names it in
/// the message ("training corpus", "corpus"). Throws DataError.
void check_corpus_file(const std::filesystem::path& path, std::string_view role);

/// Throws DataError naming `path`, line and column of the first invalid UTF-8 sequence, NUL byte or
/// over-long line of `text`, or saying that it holds no non-blank line.
void check_corpus_text(std::string_view text, const std::filesystem::path& path);

/// The same checks on a part of a file that starts at the start of line `first_line`, without the
/// "no non-blank line" one: returns whether the part has a non-blank line. Throws DataError.
bool check_corpus_part(std::string_view text, const std::filesystem::path& path, size_t first_line);

/// check_corpus_file, then the whole file read and checked with check_corpus_text.
std::string read_corpus(const std::filesystem::path& path, std::string_view role);

}  // namespace lm::tokenizer
