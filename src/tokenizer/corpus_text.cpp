#include "tokenizer/corpus_text.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/errors.h"
#include "util/fs.h"

namespace lm::tokenizer {
namespace fs = std::filesystem;

namespace {

const char* kHint = "Hint: run scripts/get_corpus.sh or fix the path.";

// Bytes of the sequence a lead byte starts (1 for ASCII), or 0 for a byte no valid sequence starts with.
size_t lead_length(unsigned char c) {
  return c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
}

// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is invalid (overlong forms, surrogates
// and code points above U+10FFFF included) or cut off by the end of `s`.
size_t utf8_length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  const size_t n = lead_length(c);
  if (n <= 1) return n;
  // the second byte's range excludes overlong forms (E0, F0), surrogates (ED) and code points above U+10FFFF (F4)
  const unsigned char lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80, hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
  if (i + n > s.size() || b(i + 1) < lo || b(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (b(i + k) < 0x80 || b(i + k) > 0xBF) return 0;
  }
  return n;
}

// True when s[i] starts a multi-byte sequence whose bytes are all continuation bytes up to the end of `s`,
// which ends before the sequence does.
bool cut_off(std::string_view s, size_t i) {
  const size_t n = lead_length(static_cast<unsigned char>(s[i]));
  if (n <= 1 || i + n <= s.size()) return false;
  for (size_t k = i + 1; k < s.size(); ++k) {
    if ((static_cast<unsigned char>(s[k]) & 0xC0) != 0x80) return false;
  }
  return true;
}

[[noreturn]] void refuse(const fs::path& path, size_t line, size_t column, const std::string& what) {
  throw DataError("[corpus] " + path.string() + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " +
                  what);
}

}  // namespace

void check_corpus_file(const fs::path& path, std::string_view role) {
  std::error_code ec;
  const fs::path resolved = path.is_relative() ? fs::absolute(path, ec).lexically_normal() : path;
  // a relative path says where it was looked for: config paths are relative to the working directory
  const std::string head = "[corpus] " + std::string(role) + " '" + path.string() + "'" +
                           (path.is_relative() && !ec ? " (resolved against the working directory: " + resolved.string() + ")" : "");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const auto p = util::read_problem(path);  // missing, or shut off by a directory above it
    if (p && p->denied) throw DataError(head + " " + p->what + ". " + p->hint);
    throw DataError(head + " " + (p ? p->what : std::string("is missing")) + ": expected a text file. " + kHint);
  }
  if (S_ISDIR(st.st_mode)) throw DataError(head + " is a directory: expected a text file. " + kHint);
  if (!S_ISREG(st.st_mode)) {
    throw DataError(head + " is not a regular file (a FIFO, socket or device): expected a text file. " + kHint);
  }
  if (const auto p = util::read_problem(path)) throw DataError(head + " " + p->what + ". " + p->hint);
}

void check_corpus_text(std::string_view text, const fs::path& path) {
  size_t line = 1, line_start = 0;
  bool any_text = false;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      line_start = ++i;
      continue;
    }
    if (i - line_start >= kMaxLineBytes) {
      refuse(path, line, 1, "line longer than " + std::to_string(kMaxLineBytes) +
                                " bytes: expected one unit (verse, paragraph) per line. Hint: add line breaks.");
    }
    if (c == '\0') refuse(path, line, i - line_start + 1, "NUL byte: expected text. Hint: is this a binary file?");
    const size_t n = utf8_length(text, i);
    if (n == 0) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned char>(c));
      refuse(path, line, i - line_start + 1,
             std::string("invalid UTF-8 (byte ") + hex + (cut_off(text, i) ? ", or a sequence cut off by the end" : "") +
                 "): expected UTF-8 text. Hint: convert it, e.g. `iconv -f latin1 -t utf-8`.");
    }
    if (c != ' ' && c != '\t' && c != '\r') any_text = true;
    i += n;
  }
  if (!any_text) {
    throw DataError("[corpus] '" + path.string() + "' holds no text: expected at least one non-blank line, got " +
                    (text.empty() ? std::string("an empty file") : std::to_string(text.size()) + " bytes of whitespace") +
                    ". " + kHint);
  }
}

std::string read_corpus(const fs::path& path, std::string_view role) {
  check_corpus_file(path, role);
  std::string text = util::read_file(path, role);
  check_corpus_text(text, path);
  return text;
}

}  // namespace lm::tokenizer
