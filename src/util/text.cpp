#include "util/text.h"

#include <charconv>

#include <cstdio>
#include <sstream>

namespace lm::util {

namespace {

// Columns of one code point (East Asian Width W/F = 2; Mn/Me/Cf and medial/final jamo = 0).
int columns(uint32_t c) {
  if (c == 0x200B || c == 0x200C || c == 0x200D || c == 0xFEFF || (c >= 0x0300 && c <= 0x036F) ||
      (c >= 0x1160 && c <= 0x11FF) || (c >= 0x20D0 && c <= 0x20FF) || (c >= 0xFE20 && c <= 0xFE2F)) {
    return 0;
  }
  static constexpr uint32_t kWide[][2] = {
      {0x1100, 0x115F}, {0x231A, 0x231B}, {0x2E80, 0x303E}, {0x3041, 0x33FF}, {0x3400, 0x4DBF},
      {0x4E00, 0x9FFF}, {0xA000, 0xA4CF}, {0xA960, 0xA97F}, {0xAC00, 0xD7A3}, {0xF900, 0xFAFF},
      {0xFE10, 0xFE19}, {0xFE30, 0xFE6F}, {0xFF00, 0xFF60}, {0xFFE0, 0xFFE6}, {0x1F300, 0x1F64F},
      {0x1F900, 0x1F9FF}, {0x20000, 0x2FFFD}, {0x30000, 0x3FFFD}};
  for (const auto& r : kWide) {
    if (c >= r[0] && c <= r[1]) return 2;
  }
  return 1;
}

}  // namespace

size_t display_width(const std::string& s) {
  size_t cols = 0;
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const size_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > s.size()) {  // not UTF-8: one column per byte
      ++cols;
      ++i;
      continue;
    }
    uint32_t c = len == 1 ? b : b & (0xFF >> (len + 1));
    for (size_t k = 1; k < len; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    cols += static_cast<size_t>(columns(c));
    i += len;
  }
  return cols;
}

std::string pad(const std::string& s, size_t width) {
  const size_t cols = display_width(s);
  return s + std::string(cols < width ? width - cols : 0, ' ');
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, sep);) out.push_back(item);
  return out;
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + items[i];
  return out;
}

std::string problem_list(const std::string& head, const std::vector<std::string>& problems, const std::string& hint) {
  return head + " " + join(problems, "; ") + ";" + (hint.empty() ? "" : " " + hint);
}

std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (n < 0 ? "-" : "") + out;
}

std::string mib(double bytes) {
  char buf[64];
  const double m = bytes / (1024.0 * 1024.0);
  if (m >= 1024.0) {
    std::snprintf(buf, sizeof buf, "%.1f GiB", m / 1024.0);
  } else {
    std::snprintf(buf, sizeof buf, "%.1f MiB", m);
  }
  return buf;
}

std::string as_written(double x) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);  // the shortest form that reads back as x
  return std::string(buf, r.ptr);
}

}  // namespace lm::util
