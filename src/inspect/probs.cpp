#include "inspect/probs.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "util/errors.h"
#include "util/text.h"

namespace lm::inspect {

std::vector<ProbRow> teacher_forced(model::GptImpl& model, const tokenizer::Tokenizer& tok, const std::vector<int32_t>& ids,
                                    int k) {
  const int64_t T = model.config().max_seq_len, n = static_cast<int64_t>(ids.size());
  if (n < 2) throw ConfigError("[inspect] probs: expected a text of at least one piece, got an empty text. Hint: pass --text with some words.");
  if (n > T + 1) {
    throw ConfigError("[inspect] probs: expected text of 1.." + std::to_string(T) +
                      " pieces (max_seq_len, after the implied line start), got " + std::to_string(n - 1) +
                      ". Hint: shorten the text.");
  }
  const int64_t V = model.config().vocab_size;
  if (k < 1 || k > V) throw ConfigError("[inspect] probs: -k expected 1.." + std::to_string(V) + ", got " + std::to_string(k));
  model.eval();
  torch::NoGradGuard no_grad;
  std::vector<int64_t> in(ids.begin(), ids.end() - 1);
  auto logp = torch::log_softmax(model.forward(torch::tensor(in).unsqueeze(0))[0].to(torch::kCPU, torch::kFloat64), -1);  // (n-1,V)
  auto p = logp.exp();
  auto entropy = -(p * logp).sum(-1) / std::log(2.0);  // (n-1) bits
  auto sums = p.sum(-1);
  std::vector<ProbRow> rows;
  for (int64_t t = 0; t + 1 < n; ++t) {
    ProbRow r;
    r.position = t;
    r.context_id = ids[t];
    r.context_piece = tok.piece(ids[t]);
    r.next_id = ids[t + 1];
    r.next_piece = tok.piece(r.next_id);
    // rank, prob and surprisal all from logp, so the token never counts itself (exp can differ by an ulp)
    const auto row = logp[t];
    const double lp = row[r.next_id].item<double>();
    r.prob = std::exp(lp);
    r.rank = 1 + (row > lp).sum().item<int64_t>();
    r.surprisal_bits = -lp / std::log(2.0);
    r.entropy_bits = entropy[t].item<double>();
    r.prob_sum = sums[t].item<double>();
    r.top = sample::top_k(p[t], k, tok);
    rows.push_back(std::move(r));
  }
  return rows;
}

std::string format_probs(const std::vector<ProbRow>& rows) {
  std::string out;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%4s  %-14s %-14s %9s %6s %9s %8s  %s\n", "pos", "context", "next (actual)", "prob", "rank",
                "surprisal", "entropy", "top alternatives (prob)");
  out += buf;
  double total_bits = 0.0;
  for (const auto& r : rows) {
    std::string alts;
    for (const auto& a : r.top) {
      std::snprintf(buf, sizeof buf, " %.3f", a.prob);
      alts += (alts.empty() ? "" : ", ") + a.piece + buf;
    }
    std::snprintf(buf, sizeof buf, "%4lld  %s %s %9.5f %6lld %7.2f b %6.2f b  ", static_cast<long long>(r.position),
                  util::pad(r.context_piece, 14).c_str(), util::pad(r.next_piece, 14).c_str(), r.prob, static_cast<long long>(r.rank), r.surprisal_bits,
                  r.entropy_bits);
    out += buf + alts + "\n";
    total_bits += r.surprisal_bits;
  }
  std::snprintf(buf, sizeof buf, "%zu predictions: mean surprisal %.3f bits (%.3f nats, perplexity %.2f)\n", rows.size(),
                total_bits / static_cast<double>(rows.size()), total_bits * std::log(2.0) / static_cast<double>(rows.size()),
                std::exp2(total_bits / static_cast<double>(rows.size())));
  return out + buf;
}

nlohmann::json probs_json(const std::vector<ProbRow>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : rows) {
    nlohmann::json top = nlohmann::json::array();
    for (const auto& a : r.top) top.push_back({{"rank", a.rank}, {"id", a.id}, {"piece", a.piece}, {"prob", a.prob}});
    out.push_back({{"position", r.position}, {"context_id", r.context_id}, {"context", r.context_piece}, {"next_id", r.next_id}, {"next", r.next_piece},
                   {"prob", r.prob}, {"rank", r.rank}, {"surprisal_bits", r.surprisal_bits},
                   {"entropy_bits", r.entropy_bits}, {"prob_sum", r.prob_sum}, {"top", top}});
  }
  return out;
}

namespace {
std::string dtype_name(const torch::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kInt64: return "int64";
    case torch::kInt32: return "int32";
    case torch::kFloat32: return "float32";
    case torch::kFloat16: return "float16";
    case torch::kBFloat16: return "bfloat16";
    case torch::kFloat64: return "float64";
    default: return c10::toString(t.scalar_type());
  }
}
}  // namespace

std::vector<Stage> trace_stages(model::GptImpl& model, const torch::Tensor& x, const torch::Tensor& y) {
  std::vector<Stage> out;
  const int64_t C = model.config().d_model;
  auto note_for = [&](const std::string& name) -> std::string {
    if (name == "ids") return "token ids";
    if (name == "tok_emb") return model.config().embedding_scale == model::EmbeddingScale::kSqrtD ? "rows of tok_emb x sqrt(C)" : "rows of tok_emb";
    if (name == "+pos_emb") return model::to_string(model.config().positions) + " positions added";
    if (name.rfind("blocks.", 0) == 0) {
      const auto& a = model.config();
      std::string qk;  // what happens to q and k between the qkv product and the scores
      if (a.qk_norm) qk = "q,k RMS-normed";
      if (a.positions == model::Positions::kRope) qk += std::string(qk.empty() ? "" : ", ") + "q,k rotated by position (rope)";
      return "x + attn(ln1 x)" + (qk.empty() ? "" : " [" + qk + "]") + ", + mlp(ln2 x) (" +
             std::to_string(a.mlp_ratio * C) + " hidden, " + model::to_string(a.mlp_activation) + ")";
    }
    if (name == "ln_f") return "final LayerNorm";
    if (name == "logits") {
      std::string head = model.config().tie_embeddings ? "x @ tok_emb^T (tied)" : "x @ head^T (untied)";
      if (model.config().logit_softcap > 0) {
        char cap[48];
        std::snprintf(cap, sizeof cap, "%g", model.config().logit_softcap);
        head = "c tanh((" + head + ")/c), c = " + cap + " (soft-cap)";
      }
      return head;
    }
    return "";
  };
  torch::NoGradGuard no_grad;
  model.eval();
  model.forward(x, {}, [&](const std::string& name, const torch::Tensor& t) {
    out.push_back({name, t.sizes().vec(), dtype_name(t), note_for(name)});
  });
  auto loss = model.forward(x, y);  // () as training computes it
  char buf[96];
  std::snprintf(buf, sizeof buf, "mean next-token cross-entropy %.4f nats", loss.item<double>());
  out.push_back({"loss", loss.sizes().vec(), dtype_name(loss), buf});
  return out;
}

std::string format_stages(const std::vector<Stage>& stages) {
  std::string out;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-10s %-18s %-8s %s\n", "stage", "shape", "dtype", "what");
  out += buf;
  for (const auto& s : stages) {
    std::string shape = "[";
    for (size_t i = 0; i < s.shape.size(); ++i) shape += (i ? ", " : "") + std::to_string(s.shape[i]);
    shape += "]";
    std::snprintf(buf, sizeof buf, "%-10s %-18s %-8s %s\n", s.name.c_str(), shape.c_str(), s.dtype.c_str(), s.note.c_str());
    out += buf;
  }
  return out;
}

}  // namespace lm::inspect
