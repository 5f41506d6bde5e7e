#include "tokenizer/bpe.h"

namespace lm::tokenizer {

namespace {

// The UTF-8 characters of `s` (a lead byte and its continuation bytes each).
std::vector<std::string> characters(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t n = 1;
    while (i + n < s.size() && (static_cast<unsigned char>(s[i + n]) & 0xC0) == 0x80) ++n;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace

std::vector<std::string> bpe_segment(const std::string& text, const std::unordered_map<std::string, float>& mergeable,
                                     std::vector<std::string>* formed) {
  std::vector<std::string> sym = characters(text);
  for (;;) {
    size_t best = sym.size();
    float best_score = 0.0f;
    for (size_t i = 0; i + 1 < sym.size(); ++i) {
      const auto it = mergeable.find(sym[i] + sym[i + 1]);
      if (it != mergeable.end() && (best == sym.size() || it->second > best_score)) {
        best = i;
        best_score = it->second;
      }
    }
    if (best == sym.size()) return sym;
    sym[best] += sym[best + 1];
    sym.erase(sym.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    if (formed) formed->push_back(sym[best]);
  }
}

std::vector<std::string> with_merge_paths(const std::vector<std::string>& candidates,
                                          const std::unordered_map<std::string, int32_t>& known,
                                          const std::unordered_map<std::string, float>& mergeable, int64_t want,
                                          std::set<std::string>& intermediate) {
  std::vector<std::string> out;
  std::set<std::string> taken;
  for (const auto& c : candidates) {
    if (static_cast<int64_t>(out.size()) >= want) break;
    if (taken.count(c)) continue;
    std::vector<std::string> formed;
    bpe_segment(c, mergeable, &formed);
    for (const auto& f : formed) {
      if (f == c || known.count(f) || taken.count(f)) continue;
      out.push_back(f);
      taken.insert(f);
      intermediate.insert(f);
    }
    out.push_back(c);
    taken.insert(c);
  }
  return out;
}

std::vector<std::string> make_reachable(std::vector<std::string>& order,
                                        const std::unordered_map<std::string, float>& old_mergeable, float lowest,
                                        const std::unordered_map<std::string, int32_t>& known,
                                        std::set<std::string>& intermediate) {
  auto extended = [&] {
    auto m = old_mergeable;
    for (size_t i = 0; i < order.size(); ++i) m[order[i]] = lowest - 1.0f - static_cast<float>(i);
    return m;
  };
  for (int round = 0; round < 4; ++round) {
    const auto m = extended();
    std::vector<std::string> next;
    std::set<std::string> have(order.begin(), order.end());
    bool changed = false;
    for (const auto& p : order) {
      const auto seg = bpe_segment(p, m);
      if (seg.size() > 1) {  // joins of the symbols left to right, each merged before p
        std::string joined = seg[0];
        for (size_t k = 1; k + 1 < seg.size(); ++k) {
          joined += seg[k];
          if (have.insert(joined).second && !known.count(joined)) {
            next.push_back(joined);
            intermediate.insert(joined);
            changed = true;
          }
        }
      }
      next.push_back(p);
    }
    order = next;
    if (!changed) break;
  }
  const auto m = extended();
  std::vector<std::string> stuck;
  for (const auto& p : order) {
    if (bpe_segment(p, m).size() != 1) stuck.push_back(p);
  }
  return stuck;
}

}  // namespace lm::tokenizer
