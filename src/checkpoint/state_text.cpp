#include "checkpoint/state_text.h"

#include <cmath>
#include <sstream>

namespace lm::checkpoint {
namespace {

using Lines = std::vector<std::pair<std::string, std::string>>;

std::string text(int64_t v) { return std::to_string(v); }
std::string text(uint64_t v) { return std::to_string(v); }
std::string text(bool v) { return v ? "true" : "false"; }
std::string text(double v) {
  if (!std::isfinite(v)) return "-";
  std::ostringstream out;
  out.precision(9);
  out << v;
  return out.str();
}

void add(Lines& out, const std::string& key, const std::string& v) {
  // A hash or the RNG state would fill a screen: the RNG state by its length, a hash by its first 16 digits.
  if (key == "torch_rng_state") {
    out.emplace_back(key, "(" + std::to_string(v.size()) + " hex digits)");
  } else {
    out.emplace_back(key, v.size() > 16 ? v.substr(0, 16) : v);
  }
}
template <class T>
void add(Lines& out, const std::string& key, const T& v) {
  out.emplace_back(key, text(v));
}
void add(Lines& out, const std::string& key, const DataIdentity& d) {
  visit_identity_fields(d, [&](const char* k, const auto& v, Presence) { add(out, key + "." + k, v); });
}

}  // namespace

Lines describe_state(const TrainerState& s) {
  Lines out;
  visit_state_fields(s, [&](const char* key, const auto& v, Presence) { add(out, key, v); });
  return out;
}

}  // namespace lm::checkpoint
