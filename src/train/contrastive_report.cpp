#include "train/contrastive_report.h"

#include <cmath>
#include <cstdio>

namespace lm::train {

namespace {

// Cosines to 4 decimals (the report's histograms).
nlohmann::json rounded(const torch::Tensor& cosines) {
  std::vector<double> out;
  const auto c = cosines.to(torch::kDouble).contiguous();
  for (int64_t i = 0; i < c.numel(); ++i) out.push_back(std::round(c.data_ptr<double>()[i] * 1e4) / 1e4);
  return out;
}

nlohmann::json side(model::GptImpl& m, const std::vector<LinePair>& pairs, const ContrastiveSpec& spec, int32_t pad,
                    int64_t batch) {
  const auto [a, b] = embed_pairs(m, pairs, spec.pool, pad, batch);
  const Retrieval r = retrieval_scores(a, b);
  namespace F = torch::nn::functional;
  const auto an = F::normalize(a.to(torch::kDouble), F::NormalizeFuncOptions().dim(1));
  const auto bn = F::normalize(b.to(torch::kDouble), F::NormalizeFuncOptions().dim(1));
  const int64_t n = a.size(0);
  const auto positive = (an * bn).sum(1);
  const auto random = (an * bn.roll(-(n / 2), 0)).sum(1);  // positive (i + N/2) mod N;
  return {{"top1", r.top1}, {"top10", r.top10}, {"mrr", r.mrr},
          {"mean_cosine_positive", positive.mean().item<double>()}, {"mean_cosine_random", random.mean().item<double>()},
          {"cosines_positive", rounded(positive)}, {"cosines_random", rounded(random)}};
}

}  // namespace

nlohmann::json sentence_vector_report(model::GptImpl& before, model::GptImpl& after, const std::vector<LinePair>& pairs,
                                      const ContrastiveSpec& spec, int32_t pad, int64_t batch) {
  const Retrieval chance = retrieval_chance(static_cast<int64_t>(pairs.size()));
  nlohmann::json j = {{"pairs", pairs.size()},
                      {"source", spec.pairs.empty() ? std::string("next_line pairs of the validation text")
                                                    : spec.val_pairs.string()},
                      {"pool", model::to_string(spec.pool)},
                      {"temperature", spec.temperature},
                      {"lm_weight", spec.lm_weight},
                      {"before", side(before, pairs, spec, pad, batch)},
                      {"after", side(after, pairs, spec, pad, batch)},
                      {"chance", {{"top1", chance.top1}, {"top10", chance.top10}, {"mrr", chance.mrr}}}};
  std::printf("sentence vectors: %zu held-out pairs (%s), %s pooling; each anchor's positive among all %zu\n",
              pairs.size(), j["source"].get<std::string>().c_str(), j["pool"].get<std::string>().c_str(), pairs.size());
  std::printf("  %-8s %8s %8s %8s %14s %14s\n", "", "top-1", "top-10", "MRR", "cos positive", "cos random");
  for (const char* k : {"before", "after"}) {
    const auto& s = j[k];
    std::printf("  %-8s %8.4f %8.4f %8.4f %14.4f %14.4f\n", k, s["top1"].get<double>(), s["top10"].get<double>(),
                s["mrr"].get<double>(), s["mean_cosine_positive"].get<double>(), s["mean_cosine_random"].get<double>());
  }
  std::printf("  %-8s %8.4f %8.4f %8.4f\n", "chance", chance.top1, chance.top10, chance.mrr);
  std::fflush(stdout);
  return j;
}

}  // namespace lm::train
