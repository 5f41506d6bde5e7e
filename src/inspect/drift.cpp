#include "inspect/drift.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "data/token_file.h"
#include "util/errors.h"
#include "util/text.h"

namespace lm::inspect {
namespace {

Stats summarize(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  auto pct = [&](double q) { return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5)]; };
  s.mean = sum / static_cast<double>(v.size());
  s.p50 = pct(0.5);
  s.p95 = pct(0.95);
  s.max = v.back();
  return s;
}

nlohmann::json stats_json(const Stats& s) { return {{"mean", s.mean}, {"p50", s.p50}, {"p95", s.p95}, {"max", s.max}}; }

}  // namespace

RowDrift row_drift(const std::string& tensor, const torch::Tensor& before, const torch::Tensor& after) {
  if (before.sizes() != after.sizes() || before.dim() != 2) {
    throw CheckpointError("[drift] " + tensor + ": expected two (V,C) tables of the same shape, got " +
                          c10::str(before.sizes()) + " and " + c10::str(after.sizes()));
  }
  torch::NoGradGuard no_grad;
  auto b = before.detach().to(torch::kFloat64), a = after.detach().to(torch::kFloat64);  // (V,C)
  auto cos = torch::cosine_similarity(a, b, 1, 1e-12);
  return {(a - b).norm(2, {1}).contiguous(), (1.0 - cos).clamp_min(0.0).contiguous()};  // cos can exceed 1 by rounding
}

DriftReport drift_report(const std::string& tensor, const torch::Tensor& before, const torch::Tensor& after,
                         const std::vector<int64_t>& counts, const tokenizer::Tokenizer& tok, int top_k,
                         int32_t first_id) {
  const RowDrift rows = row_drift(tensor, before, after);
  const int64_t V = before.size(0);
  if (!counts.empty() && static_cast<int64_t>(counts.size()) != V) {
    throw DataError("[drift] token counts: expected " + std::to_string(V) + " entries, got " + std::to_string(counts.size()));
  }
  const double* pl2 = rows.l2.data_ptr<double>();
  const double* pcos = rows.cos_drift.data_ptr<double>();
  DriftReport r;
  r.tensor = tensor;
  r.rows = V;
  std::vector<double> all_l2(pl2, pl2 + V), all_cos(pcos, pcos + V), unseen;
  for (int64_t i = 0; i < V; ++i) {
    if (!counts.empty() && counts[i] == 0) unseen.push_back(pl2[i]);
  }
  r.l2 = summarize(all_l2);
  r.cos_drift = summarize(all_cos);
  r.unseen_rows = static_cast<int64_t>(unseen.size());
  r.unseen_l2 = summarize(unseen);
  std::vector<int64_t> order(static_cast<size_t>(V));
  for (int64_t i = 0; i < V; ++i) order[i] = i;
  const int64_t k = std::min<int64_t>(top_k, V);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int64_t x, int64_t y) { return pl2[x] > pl2[y] || (pl2[x] == pl2[y] && x < y); });
  for (int64_t i = 0; i < k && pl2[order[i]] > 0.0; ++i) {  // rows that did not move are not "most moved"
    const auto row = static_cast<int32_t>(order[i]), id = first_id + row;
    r.top.push_back({id, tok.piece(id), pl2[row], all_cos[row], counts.empty() ? -1 : counts[row]});
  }
  return r;
}

std::vector<DriftReport> table_drift(const std::string& tensor, const torch::Tensor& before, const torch::Tensor& after,
                                     const torch::Tensor& added_start, const std::vector<int64_t>& counts,
                                     const tokenizer::Tokenizer& tok, int top_k) {
  const int64_t old = before.dim() == 2 ? before.size(0) : 0, rows = after.dim() == 2 ? after.size(0) : 0;
  if (old == 0 || rows < old || (rows > old && (!added_start.defined() || added_start.size(0) != rows - old))) {
    throw CheckpointError("[drift] " + tensor + ": expected a table with the rows of " + c10::str(before.sizes()) +
                          " and, past them, rows added by a fine-tune with their initial values, got " +
                          c10::str(after.sizes()) + ". Hint: compare checkpoints of one vocabulary, or a fine-tune "
                          "with its starting checkpoint.");
  }
  auto part = [&](int64_t from, int64_t n) {
    return counts.empty() ? std::vector<int64_t>{} : std::vector<int64_t>(counts.begin() + from, counts.begin() + from + n);
  };
  std::vector<DriftReport> out;
  out.push_back(drift_report(tensor, before, after.narrow(0, 0, old), part(0, old), tok, top_k));
  if (rows > old) {
    out.push_back(drift_report(tensor + " added rows", added_start, after.narrow(0, old, rows - old), part(old, rows - old),
                               tok, top_k, static_cast<int32_t>(old)));
  }
  return out;
}

std::vector<int64_t> token_counts(const std::string& token_file, int64_t vocab_size) {
  data::TokenFile f(token_file);
  std::vector<int64_t> counts(static_cast<size_t>(vocab_size), 0);
  for (uint64_t i = 0; i < f.size(); ++i) {
    const int64_t id = f.at(i);
    if (id < vocab_size) ++counts[static_cast<size_t>(id)];
  }
  return counts;
}

std::string format_drift(const DriftReport& r) {
  char buf[512];
  std::string out = "drift of " + r.tensor + " (" + std::to_string(r.rows) + " rows)\n";
  std::snprintf(buf, sizeof buf, "  %-22s %10s %10s %10s %10s\n", "", "mean", "p50", "p95", "max");
  out += buf;
  auto line = [&](const char* name, const Stats& s) {
    std::snprintf(buf, sizeof buf, "  %-22s %10.6f %10.6f %10.6f %10.6f\n", name, s.mean, s.p50, s.p95, s.max);
    out += buf;
  };
  line("L2", r.l2);
  line("cosine (1 - cos)", r.cos_drift);
  if (r.unseen_rows > 0) {
    const std::string label = "unseen rows L2 (" + std::to_string(r.unseen_rows) + ")";
    line(label.c_str(), r.unseen_l2);
  }
  if (r.l2.max == 0.0) return out + "  most moved: none moved (every row is bit-identical)\n";
  out += "  most moved:\n";
  std::snprintf(buf, sizeof buf, "  %5s  %s %7s %10s %10s %8s\n", "rank", util::pad("piece", 20).c_str(), "id", "L2", "1-cos", "count");
  out += buf;
  for (size_t i = 0; i < r.top.size(); ++i) {
    const auto& m = r.top[i];
    std::snprintf(buf, sizeof buf, "  %5zu  %s %7d %10.6f %10.6f %8s\n", i + 1, util::pad(m.piece, 20).c_str(), m.id, m.l2,
                  m.cos_drift, m.count < 0 ? "-" : std::to_string(m.count).c_str());
    out += buf;
  }
  return out;
}

nlohmann::json to_json(const DriftReport& r) {
  nlohmann::json top = nlohmann::json::array();
  for (const auto& m : r.top) {
    top.push_back({{"id", m.id}, {"piece", m.piece}, {"l2", m.l2}, {"cos_drift", m.cos_drift}, {"count", m.count}});
  }
  return {{"tensor", r.tensor},       {"rows", r.rows},
          {"l2", stats_json(r.l2)},   {"cos_drift", stats_json(r.cos_drift)},
          {"top", top},               {"unseen_rows", r.unseen_rows},
          {"unseen_l2", stats_json(r.unseen_l2)}};
}

}  // namespace lm::inspect
