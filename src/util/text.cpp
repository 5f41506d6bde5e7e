#include "util/text.h"

#include <cstdio>
#include <sstream>

namespace lm::util {

std::string pad(const std::string& s, size_t width) {
  size_t cols = 0;
  for (unsigned char c : s) cols += (c & 0xC0) != 0x80;
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

}  // namespace lm::util
