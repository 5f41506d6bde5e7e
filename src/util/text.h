// Text helpers for tables: UTF-8-aware padding, thousands separators, byte sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace lm::util {

/// Terminal columns of UTF-8 text: East Asian wide and fullwidth characters (Hangul syllables and jamo
/// leads, CJK, kana, fullwidth forms, emoji) take 2, combining marks and zero-width characters 0, the rest
/// 1 ("▁the" is 4, "먹었다" is 6). A byte that is not UTF-8 counts 1.
size_t display_width(const std::string& s);
/// Left-aligns UTF-8 text in `width` terminal columns (display_width), so tables with Hangul line up.
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
/// A number as a user writes it, for messages: the shortest form that reads back as it ("-1", "0.7",
/// "1.0000001", "1e-07"), not to_string's "-1.000000".
std::string as_written(double x);

}  // namespace lm::util
