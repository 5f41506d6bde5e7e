#include "tokenizer/corpus_text.h"

#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "util/errors.h"
#include "util/fs.h"

namespace lm::tokenizer {
namespace fs = std::filesystem;

namespace {

// The hint of a corpus that is not where the config says: the example corpora's own command for their paths
// (data/kjv/..., data/debian-faq/..., data/debian-faq-ko/...: `lmtrain corpus get`), else the path to fix.
std::string missing_hint(const fs::path& path) {
  const std::string s = path.lexically_normal().generic_string();
  for (const char* name : {"kjv", "debian-faq", "debian-faq-ko"}) {
    const std::string dir = std::string("data/") + name + "/";
    if (s.rfind(dir, 0) == 0 || s.find("/" + dir) != std::string::npos) {
      return std::string("Hint: `lmtrain corpus get ") + name + "` writes it, in the directory you run lmtrain from.";
    }
  }
  return "Hint: fix the path (a config's paths are relative to the working directory).";
}
const char* kHint = "Hint: fix the path (a config's paths are relative to the working directory).";

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

[[noreturn]] void refuse_long_line(const fs::path& path, size_t line) {
  refuse(path, line, 1, "line longer than " + std::to_string(kMaxLineBytes) +
                            " bytes: expected one unit (verse, paragraph) per line. Hint: add line breaks.");
}

// `bytes`: the file's size (0 = empty).
[[noreturn]] void refuse_blank(const fs::path& path, uint64_t bytes) {
  throw DataError("[corpus] '" + path.string() + "' holds no text: expected at least one non-blank line, got " +
                  (bytes == 0 ? std::string("an empty file") : std::to_string(bytes) + " bytes of whitespace") +
                  ". " + kHint);
}

bool hidden(const fs::path& p) {
  const std::string name = p.filename().string();
  return !name.empty() && name[0] == '.';
}

// Every regular file below `dir` whose path has no hidden component below `dir`, sorted.
CorpusFiles list_directory(const fs::path& dir, std::string_view role) {
  CorpusFiles out;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    if (hidden(it->path())) {
      if (it->is_directory(ec)) it.disable_recursion_pending();
      continue;
    }
    if (it->is_regular_file(ec)) out.push_back(it->path());
  }
  if (ec) {
    throw DataError("[corpus] " + std::string(role) + " directory '" + dir.string() + "' cannot be listed: " +
                    ec.message() + ". Hint: check its permissions.");
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

CorpusFiles list_corpus_files(const std::string& spec, std::string_view role) {
  std::error_code ec;
  CorpusFiles out;
  if (is_glob_pattern(spec) && !fs::exists(spec, ec)) {
    glob_t g{};
    const int rc = ::glob(spec.c_str(), GLOB_ERR, nullptr, &g);
    std::vector<std::string> matches(g.gl_pathv, g.gl_pathv + (rc == 0 ? g.gl_pathc : 0));
    globfree(&g);
    if (rc == GLOB_NOSPACE) throw DataError("[corpus] " + std::string(role) + " pattern '" + spec + "': out of memory");
    if (rc != 0 && rc != GLOB_NOMATCH) {
      throw DataError("[corpus] " + std::string(role) + " pattern '" + spec + "' cannot be matched: expected readable " +
                      "folders, got one that cannot be read. Hint: check the permissions of the folders it names.");
    }
    std::sort(matches.begin(), matches.end());
    for (const auto& m : matches) {
      if (fs::is_directory(m, ec)) {
        for (auto& f : list_directory(m, role)) out.push_back(std::move(f));
      } else {
        out.emplace_back(m);
      }
    }
    if (out.empty()) {
      throw DataError("[corpus] " + std::string(role) + " pattern '" + spec + "' matches no file: expected at least " +
                      "one text file. " + kHint);
    }
  } else if (fs::is_directory(spec, ec)) {
    out = list_directory(spec, role);
    if (out.empty()) {
      throw DataError("[corpus] " + std::string(role) + " directory '" + spec + "' holds no files (names starting " +
                      "with '.' are skipped): expected at least one text file. " + kHint);
    }
  } else {
    out.emplace_back(spec);
  }
  for (const auto& f : out) check_corpus_file(f, role);
  return out;
}

bool is_glob_pattern(const std::string& spec) { return spec.find_first_of("*?[") != std::string::npos; }

uint64_t corpus_bytes(const CorpusFiles& corpus) {
  uint64_t total = 0;
  for (const auto& f : corpus) {
    std::error_code ec;
    const auto n = fs::file_size(f, ec);
    if (!ec) total += static_cast<uint64_t>(n);
  }
  return total;
}

std::string describe_files(const CorpusFiles& files) {
  if (files.empty()) return "no files";
  std::string s = "'" + files.front().string() + "'";
  if (files.size() > 1) {
    s += " and " + std::to_string(files.size() - 1) + " more file" + (files.size() > 2 ? "s" : "");
  }
  return s;
}

std::vector<CorpusInput> hash_corpus(const CorpusFiles& files) {
  std::vector<CorpusInput> out;
  out.reserve(files.size());
  for (const auto& f : files) {
    std::error_code ec;
    const auto bytes = fs::file_size(f, ec);
    out.push_back({f, ec ? 0 : static_cast<uint64_t>(bytes), util::sha256_file(f)});
  }
  return out;
}

std::string corpus_sha256(const std::vector<CorpusInput>& inputs) {
  if (inputs.size() == 1) return inputs.front().sha256;
  // Paths relative to the files' common folder: `corpus`, `./corpus/` and `/abs/corpus` are one corpus.
  std::vector<fs::path> paths;
  for (const auto& in : inputs) paths.push_back(fs::absolute(in.path).lexically_normal());
  fs::path common = paths.empty() ? fs::path() : paths.front().parent_path();
  for (const auto& p : paths) {
    while (!common.empty() && p.lexically_relative(common).string().rfind("..", 0) == 0) {
      common = common.parent_path() == common ? fs::path() : common.parent_path();
    }
  }
  std::string listing;
  for (size_t i = 0; i < inputs.size(); ++i) {
    listing += inputs[i].sha256 + "  " + (common.empty() ? paths[i] : paths[i].lexically_relative(common)).string() + "\n";
  }
  return util::sha256_hex(listing);
}

CorpusReader::CorpusReader(CorpusFiles files, size_t block_bytes)
    : files_(std::move(files)), block_bytes_(std::max<size_t>(block_bytes, 1)), total_bytes_(corpus_bytes(files_)) {}

void CorpusReader::open_next_file() {
  const fs::path& path = files_[file_];
  in_ = std::ifstream(path, std::ios::binary);
  if (!in_) {
    throw DataError("[corpus] '" + path.string() + "' cannot be opened for reading: expected a readable file, got " +
                    std::strerror(errno) + ". Hint: did it change while the corpus was being read?");
  }
  carry_.clear();
  line_ = 1;
  any_text_ = false;
  sha_ = util::Sha256();
  file_bytes_ = 0;
}

void CorpusReader::finish_file() {
  const fs::path& path = files_[file_];
  if (!any_text_) refuse_blank(path, file_bytes_);
  inputs_.push_back({path, file_bytes_, sha_.hex()});
  in_.close();
  ++file_;
}

bool CorpusReader::next(std::string& block) {
  while (file_ < files_.size()) {
    if (!in_.is_open()) open_next_file();
    const fs::path& path = files_[file_];
    std::string buf = std::move(carry_);
    carry_.clear();
    const size_t have = buf.size();
    buf.resize(have + block_bytes_);
    in_.read(&buf[have], static_cast<std::streamsize>(block_bytes_));
    const size_t got = static_cast<size_t>(in_.gcount());
    if (in_.bad()) {
      throw DataError("[corpus] '" + path.string() + "' could not be read to its end: expected " +
                      std::to_string(file_bytes_ + got) + "+ readable bytes, got a read error. Hint: check the disk.");
    }
    buf.resize(have + got);
    sha_.update(buf.data() + have, got);
    file_bytes_ += got;
    bytes_read_ += got;
    const bool at_end = in_.eof();
    size_t cut = buf.size();
    if (!at_end) {
      const size_t nl = buf.rfind('\n');
      if (nl == std::string::npos) {  // no whole line yet: read on, unless the line is already too long
        if (buf.size() > kMaxLineBytes) refuse_long_line(path, line_);
        carry_ = std::move(buf);
        continue;
      }
      cut = nl + 1;
      carry_.assign(buf, cut, std::string::npos);
      buf.resize(cut);
    }
    if (check_corpus_part(buf, path, line_)) any_text_ = true;
    const auto lines = static_cast<size_t>(std::count(buf.begin(), buf.end(), '\n'));
    line_ += lines;
    lines_read_ += lines + (at_end && !buf.empty() && buf.back() != '\n' ? 1 : 0);
    if (at_end) finish_file();
    if (buf.empty()) continue;  // an empty file was refused above; the end of one holding only "\n"s is not
    block = std::move(buf);
    return true;
  }
  return false;
}

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
    throw DataError(head + " " + (p ? p->what : std::string("is missing")) + ": expected a text file. " + missing_hint(path));
  }
  if (S_ISDIR(st.st_mode)) throw DataError(head + " is a directory: expected a text file. " + kHint);
  if (!S_ISREG(st.st_mode)) {
    throw DataError(head + " is not a regular file (a FIFO, socket or device): expected a text file. " + kHint);
  }
  if (const auto p = util::read_problem(path)) throw DataError(head + " " + p->what + ". " + p->hint);
}

bool check_corpus_part(std::string_view text, const fs::path& path, size_t first_line) {
  size_t line = first_line, line_start = 0;
  bool any_text = false;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      line_start = ++i;
      continue;
    }
    if (i - line_start >= kMaxLineBytes) refuse_long_line(path, line);
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
  return any_text;
}

void check_corpus_text(std::string_view text, const fs::path& path) {
  if (!check_corpus_part(text, path, 1)) refuse_blank(path, text.empty() ? 0 : text.size());
}

std::string read_corpus(const fs::path& path, std::string_view role) {
  check_corpus_file(path, role);
  std::string text = util::read_file(path, role);
  check_corpus_text(text, path);
  return text;
}

}  // namespace lm::tokenizer
