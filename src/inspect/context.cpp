#include "inspect/context.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "util/errors.h"
#include "util/text.h"

namespace lm::inspect {

std::vector<std::vector<int32_t>> context_ids(const model::GptImpl& model, const tokenizer::Tokenizer& tok,
                                              const std::vector<std::string>& texts, const std::string& flag) {
  const int64_t T = model.config().max_seq_len;
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < texts.size(); ++i) {
    auto ids = sample::prompt_context(tok, texts[i]);
    const int64_t n = static_cast<int64_t>(ids.size()) - 1;
    if (n < 1 || n > T - 1) {
      throw ConfigError("[inspect] context: " + flag + " " + std::to_string(i + 1) + ": expected 1.." + std::to_string(T - 1) +
                        " pieces (max_seq_len " + std::to_string(T) + ", after the implied line start), got " +
                        std::to_string(n) + (n < 1 ? ". Hint: give a text with words in it." : ". Hint: shorten the text."));
    }
    out.push_back(std::move(ids));
  }
  return out;
}

std::vector<int32_t> shared_pieces(const std::vector<std::vector<int32_t>>& ids) {
  std::map<int32_t, std::vector<bool>> seen;
  std::vector<int32_t> order;
  for (size_t t = 0; t < ids.size(); ++t) {
    for (size_t p = 1; p < ids[t].size(); ++p) {  // the implied line start is shared by every text: not shown
      auto& in = seen[ids[t][p]];
      if (in.empty()) {
        in.assign(ids.size(), false);
        order.push_back(ids[t][p]);
      }
      in[t] = true;
    }
  }
  std::vector<int32_t> out;
  for (int32_t id : order) {
    if (std::count(seen[id].begin(), seen[id].end(), true) >= 2) out.push_back(id);
  }
  return out;
}

std::vector<int32_t> context_pieces(const tokenizer::Tokenizer& tok, const std::vector<std::vector<int32_t>>& ids,
                                    const std::string& piece) {
  if (!piece.empty()) return {find_piece(tok, piece)};
  auto shared = shared_pieces(ids);
  if (shared.empty()) {
    throw ConfigError("[inspect] context: no piece occurs in two or more of the texts. Hint: give texts that share a "
                      "word, or name one with --piece (it may occur twice in one text).");
  }
  return shared;
}

double exact_cosine(const torch::Tensor& a, const torch::Tensor& b) {
  auto x = a.to(torch::kFloat64).contiguous(), y = b.to(torch::kFloat64).contiguous();
  const double* p = x.data_ptr<double>();
  const double* q = y.data_ptr<double>();
  double dot = 0.0, na = 0.0, nb = 0.0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    dot += p[i] * q[i];
    na += p[i] * p[i];
    nb += q[i] * q[i];
  }
  const double denominator = std::sqrt(na * nb);  // sqrt(s*s) == s exactly: identical vectors give 1.0
  return denominator > 0.0 ? dot / denominator : 0.0;
}

namespace {

// One text through the model: each depth's states (T,C) and the log-probabilities read from it (T,V).
struct Trace {
  std::vector<torch::Tensor> states;  // per depth after the input row: input, block 0.., final
  std::vector<torch::Tensor> probs;   // per depth after the input row, float64
};

Trace trace_text(model::GptImpl& model, const std::vector<int32_t>& ids) {
  Trace tr;
  std::vector<int64_t> in(ids.begin(), ids.end());
  torch::Tensor input;
  auto h = model.forward_hidden(torch::tensor(in).unsqueeze(0), [&](const std::string& stage, const torch::Tensor& t) {
    if (stage == "tok_emb" || stage == "+pos_emb") input = t;  // positions, when added, come after the row
    if (stage.rfind("blocks.", 0) == 0) {
      if (tr.states.empty()) tr.states.push_back(input);
      tr.states.push_back(t);
    }
  });
  if (tr.states.empty()) tr.states.push_back(input);  // no blocks
  tr.states.push_back(h);
  for (size_t d = 0; d < tr.states.size(); ++d) {
    // the logit lens: the final LayerNorm and the head applied to each depth (the final one is normalised
    // already); the whole text at once, as forward() computes it, so the last depth equals inspect probs
    auto normed = d + 1 == tr.states.size() ? tr.states[d] : model.ln_f->forward(tr.states[d]);
    auto logp = torch::log_softmax(model.logits_of(normed)[0].to(torch::kCPU, torch::kFloat64), -1);
    tr.probs.push_back(logp.exp());
    tr.states[d] = tr.states[d][0].to(torch::kCPU, torch::kFloat64);
  }
  return tr;
}

}  // namespace

ContextReport context_report(model::GptImpl& model, const tokenizer::Tokenizer& tok,
                             const std::vector<std::vector<int32_t>>& ids, int32_t id, int lens_k, int nearest_k) {
  const int64_t V = model.config().vocab_size;
  if (lens_k < 1 || lens_k > V) throw ConfigError("[inspect] context: -k expected 1.." + std::to_string(V) + ", got " + std::to_string(lens_k));
  ContextReport r;
  r.id = id;
  r.piece = tok.piece(id);
  r.depths = {"input row", "input"};
  for (size_t i = 0; i < model.blocks->size(); ++i) r.depths.push_back("block " + std::to_string(i));
  r.depths.push_back("final");
  model.eval();
  torch::NoGradGuard no_grad;
  const auto table = model.tok_emb->weight.detach().to(torch::kCPU);
  const auto row = table[id].to(torch::kFloat64);
  const auto head = model.output_weight().detach().to(torch::kCPU);
  for (size_t t = 0; t < ids.size(); ++t) {
    if (std::find(ids[t].begin() + 1, ids[t].end(), id) == ids[t].end()) continue;
    const Trace tr = trace_text(model, ids[t]);
    for (size_t p = 1; p < ids[t].size(); ++p) {
      if (ids[t][p] != id) continue;
      Occurrence o;
      o.text = static_cast<int>(t);
      o.position = static_cast<int64_t>(p);
      o.vectors.push_back(row);
      o.lens.push_back(sample::top_k(torch::softmax(model.logits_of(model.ln_f->forward(table[id].unsqueeze(0)))[0].to(torch::kFloat64), -1),
                                     lens_k, tok));
      for (size_t d = 0; d < tr.states.size(); ++d) {
        o.vectors.push_back(tr.states[d][static_cast<int64_t>(p)]);
        o.lens.push_back(sample::top_k(tr.probs[d][static_cast<int64_t>(p)], lens_k, tok));
      }
      o.nearest_input = nearest(table, row, nearest_k, {id}, tok);
      o.nearest_final = nearest(head, o.vectors.back(), nearest_k, {}, tok);
      r.occurrences.push_back(std::move(o));
    }
  }
  if (r.occurrences.size() < 2) {
    throw ConfigError("[inspect] context: piece '" + r.piece + "' (id " + std::to_string(id) + ") occurs " +
                      std::to_string(r.occurrences.size()) +
                      " time(s) in the texts: expected at least two occurrences to compare. Hint: check its spelling "
                      "with `lmtrain tokenizer encode --pieces`.");
  }
  for (size_t a = 0; a < r.occurrences.size(); ++a) {
    for (size_t b = a + 1; b < r.occurrences.size(); ++b) {
      std::vector<double> cos;
      for (size_t d = 0; d < r.depths.size(); ++d) {
        cos.push_back(exact_cosine(r.occurrences[a].vectors[d], r.occurrences[b].vectors[d]));
      }
      r.pairs.emplace_back(static_cast<int>(a), static_cast<int>(b));
      r.cosines.push_back(std::move(cos));
    }
  }
  return r;
}

namespace {

// "text 2 @5": occurrence o's place.
std::string place(const Occurrence& o) {
  return "text " + std::to_string(o.text + 1) + " @" + std::to_string(o.position);
}

std::string top_list(const std::vector<sample::TokenProb>& top) {
  std::string out;
  char buf[32];
  for (const auto& a : top) {
    std::snprintf(buf, sizeof buf, " %.3f", a.prob);
    out += (out.empty() ? "" : ", ") + a.piece + buf;
  }
  return out;
}

std::string neighbour_list(const std::vector<Neighbour>& list) {
  std::string out;
  char buf[32];
  for (const auto& n : list) {
    std::snprintf(buf, sizeof buf, " %.3f", n.cosine);
    out += (out.empty() ? "" : ", ") + n.piece + buf;
  }
  return out;
}

}  // namespace

std::string format_context(const ContextReport& r, const std::vector<std::string>& texts) {
  std::string out = "piece " + r.piece + " (id " + std::to_string(r.id) + "), " + std::to_string(r.occurrences.size()) +
                    " occurrences:\n";
  for (const auto& o : r.occurrences) out += "  " + place(o) + ": " + texts[static_cast<size_t>(o.text)] + "\n";
  out += "cosine between occurrences at each depth (input row: the same id is the same row):\n";
  std::string head = "  " + util::pad("pair", 26);
  for (const auto& d : r.depths) head += util::pad(d, 11);
  out += head + "\n";
  char buf[32];
  for (size_t p = 0; p < r.pairs.size(); ++p) {
    std::string line = "  " + util::pad(place(r.occurrences[static_cast<size_t>(r.pairs[p].first)]) + " ~ " +
                                            place(r.occurrences[static_cast<size_t>(r.pairs[p].second)]),
                                        26);
    for (double c : r.cosines[p]) {
      std::snprintf(buf, sizeof buf, "%.3f", c);
      line += util::pad(buf, 11);
    }
    out += line + "\n";
  }
  out += "logit lens: the next pieces the head reads from each depth (ln_f applied first)\n";
  for (const auto& o : r.occurrences) {
    out += "  " + place(o) + "\n";
    for (size_t d = 0; d < r.depths.size(); ++d) out += "    " + util::pad(r.depths[d], 11) + top_list(o.lens[d]) + "\n";
  }
  out += "nearest vocabulary rows: to the input row (itself left out) and to the final hidden state\n";
  for (const auto& o : r.occurrences) {
    out += "  " + util::pad(place(o), 12) + " input: " + neighbour_list(o.nearest_input) + "\n";
    out += "  " + util::pad("", 12) + " final: " + neighbour_list(o.nearest_final) + "\n";
  }
  return out;
}

nlohmann::json context_json(const ContextReport& r, bool vectors) {
  auto tops = [](const std::vector<sample::TokenProb>& top) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& t : top) a.push_back({{"rank", t.rank}, {"id", t.id}, {"piece", t.piece}, {"prob", t.prob}});
    return a;
  };
  auto neighbours = [](const std::vector<Neighbour>& list) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& n : list) a.push_back({{"id", n.id}, {"piece", n.piece}, {"cosine", n.cosine}});
    return a;
  };
  nlohmann::json occ = nlohmann::json::array();
  for (const auto& o : r.occurrences) {
    nlohmann::json lens = nlohmann::json::array();
    for (const auto& l : o.lens) lens.push_back(tops(l));
    nlohmann::json j = {{"text", o.text},
                        {"position", o.position},
                        {"lens", lens},
                        {"nearest_input", neighbours(o.nearest_input)},
                        {"nearest_final", neighbours(o.nearest_final)}};
    if (vectors) {
      nlohmann::json v = nlohmann::json::array();
      for (const auto& t : o.vectors) {
        const auto c = t.contiguous();
        v.push_back(std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel()));
      }
      j["vectors"] = v;
    }
    occ.push_back(j);
  }
  nlohmann::json pairs = nlohmann::json::array();
  for (size_t p = 0; p < r.pairs.size(); ++p) {
    pairs.push_back({{"a", r.pairs[p].first}, {"b", r.pairs[p].second}, {"cosine", r.cosines[p]}});
  }
  return {{"piece", r.piece}, {"id", r.id}, {"depths", r.depths}, {"occurrences", occ}, {"pairs", pairs}};
}

}  // namespace lm::inspect
