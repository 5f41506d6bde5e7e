// Hard-wrapped text (a man page, a plain-text book, mail, the Debian FAQ's .txt) joined into one paragraph per
// line, the way its language needs (docs/formats.md "Paragraphs"). Free of LibTorch (the front executable's
// `corpus get` uses it).
//
// - Paragraphs are separated by blank lines; inside one, the wrapped lines are joined.
// - Non-breaking spaces (U+00A0, U+202F) become plain spaces, runs of spaces and tabs one space, and each line
//   is trimmed.
// - A wrap between Latin words (or digits, punctuation) becomes one space.
// - A wrap touching Hangul is decided from the text itself. A formatter that breaks a full line at any character
//   (the Korean FAQ's did) breaks inside a word as readily as at a space, and drops the space when there was one;
//   Korean writes particles and endings onto their word, so a wrong space splits a word. The words found inside
//   lines (never touched by a wrap) say which it was: glued when the next line's first fragment more often ends
//   a word than starts one, weighed by whether the fragment before the wrap more often starts a longer word than
//   stands alone; a fragment never seen counts as an ending when its first syllable seldom starts a word. In
//   such a text a URL cut in two, or a line starting with closing punctuation, continues the line before it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace lm::data {

/// What join_paragraphs did, for the log.
struct JoinCounts {
  int64_t paragraphs = 0;
  int64_t wraps = 0;           ///< line ends inside a paragraph
  int64_t without_space = 0;   ///< wraps joined with no space (inside a word)
  int64_t nbsp_lines = 0;      ///< input lines holding a non-breaking space
};

/// `text` with each blank-line-separated block of lines joined into one line (above); every output line ends
/// with '\n'. `counts`, when not null, gets what was done.
std::string join_paragraphs(std::string_view text, JoinCounts* counts = nullptr);

/// Why `text` (the start of a file: its first 5,000 lines are read) looks hard-wrapped, or "" when it does not:
/// at least 40% of the lines inside paragraphs (a non-blank line followed by another) end within 12 columns of
/// one width (their 90th percentile, between 30 and 120 columns; a wide East Asian character takes two), and
/// at least 60% of those end mid-sentence. Such a text read a line per unit trains on fragments. Measured:
/// the GPL and the Debian FAQs as packaged 88-92% and 94-97%, `man ls` 45% and 88%; a KJV verse per line,
/// a joined FAQ paragraph per line and the tests' own sentences are quiet.
std::string hard_wrap_evidence(std::string_view text);

}  // namespace lm::data
