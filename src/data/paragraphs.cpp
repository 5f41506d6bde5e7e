#include "data/paragraphs.h"

#include <algorithm>
#include <cctype>
#include <memory>
#include <unordered_map>
#include <vector>

namespace lm::data {

namespace {

using Text = std::u32string;

// Bytes that are not UTF-8 travel as U+DC80..U+DCFF (never a character of valid UTF-8) and go back out as the
// same byte, so an invalid byte survives the joining unchanged.
constexpr char32_t kRawByte = 0xDC00;

Text decode(std::string_view s) {
  Text out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    bool ok = len > 0 && i + static_cast<size_t>(len) <= s.size();
    char32_t c = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    for (int k = 1; ok && k < len; ++k) {
      const auto t = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      ok = (t >> 6) == 2;
      c = (c << 6) | (t & 0x3F);
    }
    const char32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (ok && len > 1) ok = c >= least[len] && c <= 0x10FFFF && (c < 0xD800 || c > 0xDFFF);
    if (!ok) {
      out.push_back(kRawByte + b);
      ++i;
      continue;
    }
    out.push_back(c);
    i += static_cast<size_t>(len);
  }
  return out;
}

void encode(const Text& t, std::string& out) {
  for (const char32_t c : t) {
    if (c >= kRawByte + 0x80 && c <= kRawByte + 0xFF) {
      out.push_back(static_cast<char>(c - kRawByte));
    } else if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (c >> 18)));
      out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
}

bool is_nbsp(char32_t c) { return c == 0x00A0 || c == 0x202F; }

// White space a line is trimmed of (Unicode's, as Python's str.strip takes it).
bool is_space(char32_t c) {
  return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_hangul(char32_t c) {
  return (c >= 0xAC00 && c <= 0xD7A3) || (c >= 0x1100 && c <= 0x11FF) || (c >= 0x3130 && c <= 0x318F);
}

// Letters and digits: ASCII, Latin-1 and Latin Extended, Greek, Cyrillic, Hangul, kana, CJK ideographs and the
// full-width forms (the scripts whose wraps this rule meets).
bool is_alnum(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
  if (c >= 0xC0 && c <= 0x24F) return c != 0xD7 && c != 0xF7;
  return (c >= 0x370 && c <= 0x52F && c != 0x37E && c != 0x387) || is_hangul(c) || (c >= 0x3040 && c <= 0x30FF) ||
         (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0xFF10 && c <= 0xFF19) || (c >= 0xFF21 && c <= 0xFF3A) ||
         (c >= 0xFF41 && c <= 0xFF5A) || c == 0xAA || c == 0xB5 || c == 0xBA || c == 0xB2 || c == 0xB3 || c == 0xB9 ||
         (c >= 0xBC && c <= 0xBE);
}

bool is_word_char(char32_t c) { return c == '_' || is_alnum(c); }

// Punctuation around a word that does not belong to it ("요?" -> "요").
bool is_edge_punct(char32_t c) {
  static const Text kEdge = U"\"'()[]{}<>.,:;!?\u00b7\u2026\u201c\u201d\u2018\u2019\u300c\u300d";
  return kEdge.find(c) != Text::npos;
}

Text core(const Text& token) {
  size_t b = 0, e = token.size();
  while (b < e && is_edge_punct(token[b])) ++b;
  while (e > b && is_edge_punct(token[e - 1])) --e;
  return token.substr(b, e - b);
}

// The lines of one paragraph: trimmed, non-breaking spaces made plain, runs of spaces and tabs one space.
std::vector<std::vector<Text>> split_paragraphs(const Text& text, JoinCounts* counts) {
  std::vector<std::vector<Text>> paras;
  std::vector<Text> para;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(U'\n', start);
    if (end == Text::npos) end = text.size();
    Text line;
    bool nbsp = false;
    for (size_t i = start; i < end; ++i) {
      char32_t c = text[i];
      if (is_nbsp(c)) nbsp = true, c = ' ';
      if (c == '\t') c = ' ';
      if (c == ' ' && !line.empty() && line.back() == ' ') continue;
      line.push_back(c);
    }
    if (nbsp && counts) ++counts->nbsp_lines;
    size_t b = 0, e = line.size();
    while (b < e && is_space(line[b])) ++b;
    while (e > b && is_space(line[e - 1])) --e;
    if (e > b) {
      para.push_back(line.substr(b, e - b));
    } else if (!para.empty()) {
      paras.push_back(std::move(para));
      para.clear();
    }
    start = end + 1;
  }
  if (!para.empty()) paras.push_back(std::move(para));
  return paras;
}

std::vector<Text> split_spaces(const Text& line) {
  std::vector<Text> out;
  size_t start = 0;
  while (true) {
    const size_t end = line.find(U' ', start);
    out.push_back(line.substr(start, end == Text::npos ? Text::npos : end - start));
    if (end == Text::npos) return out;
    start = end + 1;
  }
}

// What the words inside lines (never touched by a wrap) say about where words start and end.
class Evidence {
 public:
  explicit Evidence(const std::vector<std::vector<Text>>& paras) {
    for (const auto& para : paras) {
      for (const Text& line : para) {
        const std::vector<Text> tokens = split_spaces(line);
        for (size_t t = 1; t + 1 < tokens.size(); ++t) {
          const Text word = core(tokens[t]);
          ++words_[word];
          for (size_t i = 1; i <= std::min<size_t>(word.size(), 12); ++i) {
            ++starts_[word.substr(0, i)];
            if (i < word.size()) ++ends_[word.substr(word.size() - i)];
          }
          if (word.empty()) continue;
          ++first_[word[0]];
          for (const char32_t ch : word) ++seen_[ch];
        }
      }
    }
  }

  // Whether `fragment`, at the start of a wrapped line, continues the word `before` it: the odds that the
  // fragment ends a word rather than starts one, times the odds that `before` starts a longer word rather than
  // being one.
  bool glued(const Text& before, const Text& fragment) const {
    if (fragment.empty()) return false;
    const double fs = count(starts_, fragment), fe = count(ends_, fragment);
    double right = (fe + 0.5) / (fs + 0.5);
    double left = 1.0;
    if (!before.empty()) {
      const double w = count(words_, before);
      left = (count(starts_, before) - w + 0.5) / (w + 0.5);
    }
    if (fs + fe == 0) {  // a fragment never seen: does its first syllable start words?
      const char32_t ch = fragment[0];
      const double seen = count(seen_, ch), first = count(first_, ch);
      right = seen == 0 || first < 0.25 * seen ? 4.0 : 0.25;
    }
    return right * left > 1.0;
  }

 private:
  template <typename Map, typename Key>
  static double count(const Map& m, const Key& k) {
    const auto it = m.find(k);
    return it == m.end() ? 0.0 : static_cast<double>(it->second);
  }
  std::unordered_map<Text, int64_t> starts_, ends_, words_;
  std::unordered_map<char32_t, int64_t> first_, seen_;
};

// A URL's opening cut at the line end: a word character, "://", then no white space to the end.
bool url_open(const Text& token) {
  for (size_t p = token.find(U"://"); p != Text::npos; p = token.find(U"://", p + 1)) {
    if (p == 0 || !is_word_char(token[p - 1])) continue;
    if (std::none_of(token.begin() + static_cast<std::ptrdiff_t>(p) + 3, token.end(), is_space)) return true;
  }
  return false;
}

// Whether the wrap between the text ending in `last` (its last space-separated token) and the line starting with
// `first` was inside a word. `anywhere`: the text holds Hangul, whose formatter broke lines at any character.
bool glue(const Text& last, const Text& first, const Evidence* evidence, bool anywhere) {
  static const Text kClosing = U"/:,.;?!)";
  if (anywhere && ((url_open(last) && last.back() != U')') || kClosing.find(first[0]) != Text::npos)) return true;
  if (!(is_hangul(last.back()) && is_hangul(first[0]))) {
    // Latin, digits or punctuation on a side: a space; a Korean particle after a Latin word ("GNU/Linux에서")
    // is glued when the fragment is one.
    return is_hangul(first[0]) && is_alnum(last.back()) && evidence->glued(Text(), core(first));
  }
  return evidence->glued(core(last), core(first));
}

}  // namespace

std::string join_paragraphs(std::string_view text, JoinCounts* counts) {
  const Text all = decode(text);
  const auto paras = split_paragraphs(all, counts);
  const bool anywhere = std::any_of(all.begin(), all.end(), is_hangul);
  // Only a wrap before a Hangul line start consults the evidence: none without Hangul.
  const std::unique_ptr<Evidence> evidence = anywhere ? std::make_unique<Evidence>(paras) : nullptr;
  std::string out;
  out.reserve(text.size());
  for (const auto& para : paras) {
    Text joined = para[0];
    for (size_t i = 1; i < para.size(); ++i) {
      const size_t space = joined.rfind(U' ');
      const Text last = space == Text::npos ? joined : joined.substr(space + 1);
      const Text first = para[i].substr(0, para[i].find(U' '));
      const bool inside = glue(last, first, evidence.get(), anywhere);
      if (counts) ++counts->wraps, counts->without_space += inside ? 1 : 0;
      if (!inside) joined.push_back(U' ');
      joined += para[i];
    }
    encode(joined, out);
    out.push_back('\n');
  }
  if (counts) counts->paragraphs = static_cast<int64_t>(paras.size());
  return out;
}

std::string hard_wrap_evidence(std::string_view text) {
  constexpr size_t kMaxLines = 5000;
  constexpr int64_t kNear = 12, kMinWidth = 30, kMaxWidth = 120, kMinInside = 40;
  std::vector<std::string_view> lines;
  for (size_t start = 0; start < text.size() && lines.size() < kMaxLines;) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back()))) line.remove_suffix(1);
    lines.push_back(line);
    start = end + 1;
  }
  auto chars = [](std::string_view l) {  // display width: East Asian wide characters take two columns
    int64_t width = 0;
    for (const char32_t c : decode(l)) {
      const bool wide = (c >= 0x1100 && c <= 0x115F) || (c >= 0x2E80 && c <= 0xA4CF && c != 0x303F) ||
                        (c >= 0xAC00 && c <= 0xD7A3) || (c >= 0xF900 && c <= 0xFAFF) || (c >= 0xFE30 && c <= 0xFE4F) ||
                        (c >= 0xFF00 && c <= 0xFF60) || (c >= 0xFFE0 && c <= 0xFFE6) || c >= 0x20000;
      width += wide ? 2 : 1;
    }
    return width;
  };
  std::vector<std::string_view> inside;  // non-blank lines followed by a non-blank line
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    if (!lines[i].empty() && !lines[i + 1].empty()) inside.push_back(lines[i]);
  }
  if (static_cast<int64_t>(inside.size()) < kMinInside) return "";
  std::vector<int64_t> lengths;
  for (const auto l : inside) lengths.push_back(chars(l));
  std::vector<int64_t> sorted = lengths;
  std::sort(sorted.begin(), sorted.end());
  const int64_t width = sorted[sorted.size() * 9 / 10];  // the 90th percentile: the wrapping width
  if (width < kMinWidth || width > kMaxWidth) return "";
  static const std::string_view kEnders[] = {".", "!", "?", ":", ";", "\"", "'", ")", "]", "\u3002", "\u00bb", "\u300d", "\u201d"};
  int64_t near = 0, mid = 0;
  for (size_t i = 0; i < inside.size(); ++i) {
    if (lengths[i] < width - kNear || lengths[i] > width) continue;
    ++near;
    const std::string_view l = inside[i];
    const bool ends = std::any_of(std::begin(kEnders), std::end(kEnders), [&](std::string_view e) {
      return l.size() >= e.size() && l.substr(l.size() - e.size()) == e;
    });
    mid += ends ? 0 : 1;
  }
  const auto n = static_cast<int64_t>(inside.size());
  if (near * 10 < n * 4 || mid * 10 < near * 6) return "";
  return std::to_string(near * 100 / n) + "% of " + std::to_string(n) + " lines inside paragraphs end within " +
         std::to_string(kNear) + " characters of width " + std::to_string(width) + ", " + std::to_string(mid * 100 / near) +
         "% of those mid-sentence";
}

}  // namespace lm::data
