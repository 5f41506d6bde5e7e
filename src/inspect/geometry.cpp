#include "inspect/geometry.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "model/positions.h"
#include "util/errors.h"
#include "util/text.h"

namespace lm::inspect {

int32_t find_piece(const tokenizer::Tokenizer& tok, const std::string& text) {
  for (const std::string& candidate : {"\xE2\x96\x81" + text, text}) {  // the word first
    const int32_t id = tok.piece_to_id(candidate);
    if (id >= 0 && id != tok.unk_id() && tok.piece(id) == candidate) return id;
  }
  throw ConfigError("[inspect] piece: expected a piece of the vocabulary, got '" + text + "' (tried '" + text + "' and '\xE2\x96\x81" +
                    text + "'). Hint: `lmtrain tokenizer encode --pieces --text ...` shows how text splits.");
}

torch::Tensor cosine_matrix(const torch::Tensor& x) {
  auto n = torch::nn::functional::normalize(x.to(torch::kFloat64), torch::nn::functional::NormalizeFuncOptions().dim(1));
  return n.matmul(n.t());
}

torch::Tensor cosine_to_table(const torch::Tensor& table, const torch::Tensor& queries) {
  torch::NoGradGuard no_grad;
  auto t = table.to(torch::kFloat64);
  auto q = queries.to(torch::kFloat64);
  auto norms = t.norm(2, 1).unsqueeze(0) * q.norm(2, 1).unsqueeze(1);  // (Q,V)
  return q.matmul(t.t()) / norms.clamp_min(1e-300);
}

namespace {

void check_k(int k, int64_t V) {
  if (k < 1 || k > V) throw ConfigError("[inspect] neighbours: -k expected 1.." + std::to_string(V) + ", got " + std::to_string(k));
}

// The k best entries of one row of cosines (excluded ones already set to -2), most similar first.
std::vector<Neighbour> best_of(const torch::Tensor& cos, int k, size_t n_excluded, const tokenizer::Tokenizer& tok) {
  auto [vals, idx] = cos.topk(std::min<int64_t>(cos.size(0), k + static_cast<int64_t>(n_excluded)));
  auto v = vals.contiguous(), ix = idx.contiguous();
  const double* pv = v.data_ptr<double>();
  const int64_t* pi = ix.data_ptr<int64_t>();
  std::vector<Neighbour> out;
  for (int64_t i = 0; i < v.size(0) && static_cast<int>(out.size()) < k; ++i) {
    if (pv[i] < -1.5) break;
    const auto id = static_cast<int32_t>(pi[i]);
    out.push_back({id, tok.piece(id), pv[i]});
  }
  return out;
}

}  // namespace

std::vector<Neighbour> nearest(const torch::Tensor& table, const torch::Tensor& query, int k,
                               const std::vector<int32_t>& exclude, const tokenizer::Tokenizer& tok) {
  check_k(k, table.size(0));
  auto cos = cosine_to_table(table, query.unsqueeze(0))[0];  // (V)
  for (int32_t id : exclude) cos[id] = -2.0;                 // below any cosine
  return best_of(cos, k, exclude.size(), tok);
}

std::vector<std::vector<Neighbour>> nearest_each(const torch::Tensor& table, const std::vector<int32_t>& ids, int k,
                                                 const tokenizer::Tokenizer& tok) {
  check_k(k, table.size(0) - 1);
  std::vector<std::vector<Neighbour>> out;
  constexpr size_t kChunk = 256;  // (256,V) cosines at a time
  for (size_t from = 0; from < ids.size(); from += kChunk) {
    const size_t n = std::min(kChunk, ids.size() - from);
    auto index = torch::tensor(std::vector<int64_t>(ids.begin() + static_cast<std::ptrdiff_t>(from),
                                                    ids.begin() + static_cast<std::ptrdiff_t>(from + n)));
    auto cos = cosine_to_table(table, table.index_select(0, index));  // (n,V)
    for (size_t i = 0; i < n; ++i) {
      auto row = cos[static_cast<int64_t>(i)];
      row[ids[from + i]] = -2.0;
      out.push_back(best_of(row, k, 1, tok));
    }
  }
  return out;
}

Projection pca(const torch::Tensor& x, int dims) {
  torch::NoGradGuard no_grad;
  if (x.dim() != 2 || dims < 1 || dims > std::min(x.size(0), x.size(1))) {
    throw ConfigError("[inspect] pca: expected a (N,C) table with N, C >= " + std::to_string(dims) + ", got " + c10::str(x.sizes()));
  }
  auto centred = x.to(torch::kFloat64);
  centred = centred - centred.mean(0, true);
  auto [u, s, vh] = at::linalg_svd(centred, false);
  auto axes = vh.slice(0, 0, dims).clone();  // (dims,C)
  for (int64_t d = 0; d < dims; ++d) {
    if (axes[d][axes[d].abs().argmax()].item<double>() < 0) axes[d].neg_();
  }
  Projection p;
  p.coords = centred.matmul(axes.t());
  const auto var = s.pow(2);
  const double total = std::max(var.sum().item<double>(), 1e-300);
  for (int64_t d = 0; d < dims; ++d) p.explained.push_back(var[d].item<double>() / total);
  return p;
}

std::string format_neighbours(const std::string& title, const std::vector<Neighbour>& list) {
  std::string out = title + "\n";
  char buf[160];
  for (size_t i = 0; i < list.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%4zu  %s %7d  cos %.4f\n", i + 1, util::pad(list[i].piece, 20).c_str(), list[i].id, list[i].cosine);
    out += buf;
  }
  return out;
}

std::string format_neighbour_change(const std::vector<Neighbour>& before, const std::vector<Neighbour>& after) {
  auto rank_in = [](const std::vector<Neighbour>& l, int32_t id) {
    for (size_t i = 0; i < l.size(); ++i) {
      if (l[i].id == id) return static_cast<int>(i + 1);
    }
    return 0;
  };
  std::string out;
  char buf[200];
  std::snprintf(buf, sizeof buf, "%4s  %s %-10s | %s %-10s %s\n", "rank", util::pad("A", 20).c_str(), "cos", util::pad("B", 20).c_str(), "cos",
                "rank of B's piece in A");
  out += buf;
  int kept = 0;
  for (size_t i = 0; i < std::max(before.size(), after.size()); ++i) {
    const bool has_a = i < before.size(), has_b = i < after.size();
    const int was = has_b ? rank_in(before, after[i].id) : 0;
    kept += was > 0;
    std::snprintf(buf, sizeof buf, "%4zu  %s %-10s | %s %-10s %s\n", i + 1, util::pad(has_a ? before[i].piece : "", 20).c_str(),
                  has_a ? std::to_string(before[i].cosine).substr(0, 6).c_str() : "", util::pad(has_b ? after[i].piece : "", 20).c_str(),
                  has_b ? std::to_string(after[i].cosine).substr(0, 6).c_str() : "",
                  !has_b ? "" : was ? std::to_string(was).c_str() : "new");
    out += buf;
  }
  std::snprintf(buf, sizeof buf, "overlap: %d of %zu neighbours in both lists\n", kept, after.size());
  return out + buf;
}

namespace {

// Mean cosine between positions i and i+d, for d = 1, 2, 4, ... < T.
std::vector<std::pair<int64_t, double>> cosine_by_distance(const torch::Tensor& cos) {
  std::vector<std::pair<int64_t, double>> out;
  for (int64_t d = 1; d < cos.size(0); d *= 2) out.emplace_back(d, cos.diagonal(d).mean().item<double>());
  return out;
}

// The similarity structure over the whole table [0, max_seq_len): mean cosine by distance, and for a
// learned table its closeness to the sinusoidal one.
std::string format_table_structure(model::GptImpl& model) {
  const auto& a = model.config();
  const bool learned = a.positions == model::Positions::kLearned;
  std::string out;
  char buf[256];
  const auto own = cosine_matrix(model.pos_emb->forward(a.max_seq_len, 0));
  const auto sin = cosine_matrix(model::sinusoidal_table(a.max_seq_len, a.d_model));
  out += "\nmean cosine between positions p and p+d (whole table):\n     d";
  const auto mine = cosine_by_distance(own), ref = cosine_by_distance(sin);
  for (auto& [d, c] : mine) {
    std::snprintf(buf, sizeof buf, " %7lld", static_cast<long long>(d));
    out += buf;
  }
  out += std::string("\n") + (learned ? "learned" : "  table");
  for (auto& [d, c] : mine) {
    std::snprintf(buf, sizeof buf, " %7.3f", c);
    out += buf;
  }
  out += "\n";
  if (learned) {
    out += "    sin";
    for (auto& [d, c] : ref) {
      std::snprintf(buf, sizeof buf, " %7.3f", c);
      out += buf;
    }
    // how close to sinusoidal: correlation of the two similarity structures (off-diagonal entries)
    auto mask = torch::ones_like(own, torch::kBool).triu(1);
    auto x = own.masked_select(mask), y = sin.masked_select(mask);
    x = x - x.mean();
    y = y - y.mean();
    const double r = (x * y).sum().item<double>() / std::sqrt((x * x).sum().item<double>() * (y * y).sum().item<double>());
    std::snprintf(buf, sizeof buf,
                  "\ncloseness to sinusoidal: correlation of the two position-similarity matrices r = %.3f "
                  "(1 = same structure, 0 = unrelated)\n",
                  r);
    out += buf;
  }
  return out;
}

}  // namespace

torch::Tensor rotated_unit_rows(const model::RotaryImpl& rope, const std::vector<int64_t>& positions) {
  const int64_t D = rope.head_dim();
  const auto u = torch::full({1, D}, 1.0 / std::sqrt(static_cast<double>(D)), torch::kFloat64);  // (1,D)
  std::vector<torch::Tensor> rows;
  for (int64_t p : positions) {
    auto [c, s] = model::rotary_tables(1, D, rope.base(), p);  // (1,D/2) each
    rows.push_back(model::rotate_half(u, c.to(torch::kFloat64), s.to(torch::kFloat64))[0]);
  }
  return torch::stack(rows);  // (P,D)
}

namespace {

// The (P,P) matrix `cos` as a table headed by `positions` across and down.
std::string format_position_matrix(const std::vector<int64_t>& positions, const torch::Tensor& cos) {
  std::string out;
  char buf[32];
  for (int64_t p : positions) {
    std::snprintf(buf, sizeof buf, " %6lld", static_cast<long long>(p));
    out += buf;
  }
  out += "\n";
  for (size_t i = 0; i < positions.size(); ++i) {
    std::snprintf(buf, sizeof buf, "%6lld", static_cast<long long>(positions[i]));
    out += buf;
    for (size_t j = 0; j < positions.size(); ++j) {
      std::snprintf(buf, sizeof buf, " %6.3f", cos[static_cast<int64_t>(i)][static_cast<int64_t>(j)].item<double>());
      out += buf;
    }
    out += "\n";
  }
  return out;
}

// `inspect positions` of a rope model: what each pair turns by, and the cosine between a vector rotated to
// two positions, which depends on their offset only.
std::string format_rotary(const model::RotaryImpl& rope, int64_t max_seq_len, const std::vector<int64_t>& positions) {
  std::string out;
  char buf[512];
  const int64_t D = rope.head_dim();
  std::snprintf(buf, sizeof buf,
                "rope positions, max_seq_len %lld, head width %lld, base %g: nothing is added to the token rows; in\n"
                "every attention layer each head's q and k are rotated, pair i = (x[i], x[i+%lld]) by the angle\n"
                "p x base^(-2i/%lld) at position p, so q_p . k_s depends on q, k and the offset p - s only\n",
                static_cast<long long>(max_seq_len), static_cast<long long>(D), rope.base(),
                static_cast<long long>(D / 2), static_cast<long long>(D));
  out += buf;
  const auto freq = rope.frequencies();  // (D/2) radians per token
  out += "\npair  radians/token  wavelength (tokens)\n";
  for (int64_t i = 0; i < freq.size(0); ++i) {
    const double f = freq[i].item<double>(), wavelength = 2.0 * M_PI / f;
    std::snprintf(buf, sizeof buf, "%4lld  %13.6g  %19.6g%s\n", static_cast<long long>(i), f, wavelength,
                  wavelength > static_cast<double>(max_seq_len) ? "  (longer than the context)" : "");
    out += buf;
  }
  // A unit vector u with equal components, rotated to positions p and s: cos = mean over pairs of
  // cos((p - s) x freq_i). The same offset from two starts gives the same cosine: relative, not absolute.
  const int64_t far = std::max<int64_t>(100, max_seq_len / 2);
  out += "\ncosine between a unit vector rotated to position p and to p + d (the same for every p)\n"
         "       d      p = 0  p = " + std::to_string(far) + "\n";
  for (int64_t d = 0; d < 2 * max_seq_len; d = d == 0 ? 1 : 2 * d) {
    const auto a = rotated_unit_rows(rope, {0, d}), b = rotated_unit_rows(rope, {far, far + d});
    std::snprintf(buf, sizeof buf, "%8lld %10.4f %10.4f\n", static_cast<long long>(d), a[0].dot(a[1]).item<double>(),
                  b[0].dot(b[1]).item<double>());
    out += buf;
  }
  const auto rows = rotated_unit_rows(rope, positions);
  const auto cos = cosine_matrix(rows);
  out += "\ncosine between the unit vector rotated to these positions (each entry depends on the two positions'\n"
         "offset only)\n      ";
  out += format_position_matrix(positions, cos);
  out += "\nLearned and sinusoidal positions are vectors added to each token row: absolute places, whose\n"
         "similarity may differ between (0, d) and (100, 100 + d). Rotary positions add nothing; they change\n"
         "how q and k meet, by the offset alone.\n";
  return out;
}

}  // namespace

std::string format_positions(model::GptImpl& model, const std::vector<int64_t>& positions, const std::vector<int64_t>& dims) {
  torch::NoGradGuard no_grad;
  const auto& a = model.config();
  if (a.positions == model::Positions::kRope) {
    for (int64_t p : positions) {
      if (p < 0) throw ConfigError("[inspect] positions: expected positions >= 0, got " + std::to_string(p));
    }
    return format_rotary(*model.rope, a.max_seq_len, positions);
  }
  const bool learned = a.positions == model::Positions::kLearned;
  for (int64_t p : positions) {
    if (p < 0 || (learned && p >= a.max_seq_len)) {
      throw ConfigError("[inspect] positions: expected 0.." + std::to_string(a.max_seq_len - 1) +
                        (learned ? " (learned table)" : "") + ", got " + std::to_string(p));
    }
  }
  for (int64_t d : dims) {
    if (d < 0 || d >= a.d_model) throw ConfigError("[inspect] dims: expected 0.." + std::to_string(a.d_model - 1) + ", got " + std::to_string(d));
  }
  std::string out;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s positions, max_seq_len %lld, d_model %lld%s\n", learned ? "learned" : "sinusoidal",
                static_cast<long long>(a.max_seq_len), static_cast<long long>(a.d_model),
                learned ? " (rows of pos_emb.weight)" : " (PE(p,2i) = sin(p/10000^(2i/C)), PE(p,2i+1) = cos(...); any p)");
  out += buf;
  std::vector<torch::Tensor> rows;  // only the requested rows: sinusoidal positions can be far out
  for (int64_t p : positions) rows.push_back(model.pos_emb->forward(1, p)[0]);
  const torch::Tensor chosen = torch::stack(rows).to(torch::kFloat64);  // (P,C)
  out += "\n   pos  norm    ";
  for (int64_t d : dims) {
    std::snprintf(buf, sizeof buf, " %8s", ("d" + std::to_string(d)).c_str());
    out += buf;
  }
  out += "\n";
  for (size_t i = 0; i < positions.size(); ++i) {
    const auto row = chosen[static_cast<int64_t>(i)];
    std::snprintf(buf, sizeof buf, "%6lld  %7.4f ", static_cast<long long>(positions[i]), row.norm().item<double>());
    out += buf;
    for (int64_t d : dims) {
      std::snprintf(buf, sizeof buf, " %8.4f", row[d].item<double>());
      out += buf;
    }
    out += "\n";
  }
  auto cos = cosine_matrix(chosen);
  out += "\ncosine similarity between these positions\n      ";
  out += format_position_matrix(positions, cos);
  return out + format_table_structure(model);
}

}  // namespace lm::inspect
