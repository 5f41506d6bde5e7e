// Text helpers for tables: UTF-8-aware padding, thousands separators, byte sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace lm::util {

/// Left-aligns UTF-8 text in `width` columns (counting code points, so "▁the" is 4 wide, not 6).
std::string pad(const std::string& s, size_t width);
/// "a,b,c" -> {"a","b","c"} (a trailing separator adds no empty item; "" -> {}).
std::vector<std::string> split(const std::string& text, char sep);
/// {"a","b"} joined with ", " -> "a, b" ({} -> "").
std::string join(const std::vector<std::string>& items, const std::string& sep);
/// The shape of a refusal that lists several problems: "HEAD p1; p2; HINT" (one line; no hint: "HEAD p1; p2;").
std::string problem_list(const std::string& head, const std::vector<std::string>& problems,
                         const std::string& hint = "");
/// 1234567 -> "1,234,567".
std::string with_commas(int64_t n);
/// Bytes in MiB (or GiB from 1 GiB) with one decimal: "390.6 MiB".
std::string mib(double bytes);

}  // namespace lm::util
