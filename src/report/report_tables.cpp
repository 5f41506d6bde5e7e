// The report's tensor sections: the embedding map, the positions, a fine-tune's drift and the next-token
// bars. Every number comes from inspect/ (the code behind `lmtrain inspect ...`).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "inspect/context.h"
#include "inspect/drift.h"
#include "inspect/geometry.h"
#include "inspect/probs.h"
#include "model/positions.h"
#include "report/sections.h"
#include "sample/sampler.h"
#include "train/finetune.h"
#include "util/fs.h"

namespace lm::report {
namespace fs = std::filesystem;

namespace {

// A JSON file `lmtrain finetune` wrote into the run directory; null when there is none or it is damaged (the
// section then says there is none).
nlohmann::json run_json(const fs::path& f, const std::string& what) {
  if (!fs::is_regular_file(f)) return nullptr;
  try {
    return nlohmann::json::parse(util::read_file(f, what));
  } catch (const nlohmann::json::exception&) {
    return nullptr;
  }
}

// The ids of the `n` most frequent pieces (ties by id); without counts, the first n ids.
std::vector<int32_t> most_frequent(const std::vector<int64_t>& counts, int64_t vocab, int64_t n) {
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  if (counts.empty()) {
    ids.resize(static_cast<size_t>(std::min(n, vocab)));
    return ids;
  }
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return counts[a] > counts[b]; });
  const auto seen = std::count_if(counts.begin(), counts.end(), [](int64_t c) { return c > 0; });
  ids.resize(static_cast<size_t>(std::min<int64_t>(n, std::max<int64_t>(seen, 1))));
  return ids;
}

nlohmann::json column(const torch::Tensor& t, int digits) {
  auto c = t.to(torch::kFloat64).contiguous();
  nlohmann::json out = nlohmann::json::array();
  for (int64_t i = 0; i < c.numel(); ++i) out.push_back(rounded(c.data_ptr<double>()[i], digits));
  return out;
}

}  // namespace

nlohmann::json map_section(const Sources& s, int points, int neighbours) {
  torch::NoGradGuard no_grad;
  const auto& table = s.ck.model->tok_emb->weight;
  const auto ids = most_frequent(s.counts, table.size(0), points);
  const auto rows = table.index_select(0, torch::tensor(std::vector<int64_t>(ids.begin(), ids.end())));
  const auto proj = inspect::pca(rows, 2);
  nlohmann::json nb_ids = nlohmann::json::array(), nb_cos = nlohmann::json::array(), counts = nlohmann::json::array();
  for (const auto& list : inspect::nearest_each(table, ids, neighbours, *s.tok)) {
    nlohmann::json a = nlohmann::json::array(), b = nlohmann::json::array();
    for (const auto& n : list) {
      a.push_back(n.id);
      b.push_back(rounded(n.cosine, 4));
    }
    nb_ids.push_back(a);
    nb_cos.push_back(b);
  }
  for (int32_t id : ids) counts.push_back(s.counts.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.counts[id]));
  return {{"tensor", "tok_emb.weight"},
          {"method", "PCA"},
          {"explained", {rounded(proj.explained[0], 3), rounded(proj.explained[1], 3)}},
          {"ids", ids},
          {"x", column(proj.coords.select(1, 0), 4)},
          {"y", column(proj.coords.select(1, 1), 4)},
          {"count", counts},
          {"counts_source", s.counts_source},
          {"neighbours", {{"ids", nb_ids}, {"cos", nb_cos}}}};
}

nlohmann::json positions_section(const Sources& s, const std::vector<int32_t>& map_ids) {
  torch::NoGradGuard no_grad;
  auto& model = *s.ck.model;
  const int64_t T = s.ck.arch.max_seq_len;
  const int64_t stride = (T + 127) / 128;
  const auto chosen = torch::arange(0, T, stride);
  const auto tok_rows = model.tok_emb->weight.index_select(0, torch::tensor(std::vector<int64_t>(map_ids.begin(), map_ids.end())));
  nlohmann::json out = {{"kind", model::to_string(s.ck.arch.positions)},
                        {"positions", column(chosen, 6)},
                        {"tok_norms", column(tok_rows.norm(2, 1), 4)}};
  torch::Tensor cos;
  if (model.rope) {  // nothing added: the cosines of a unit vector rotated to each position, and the pairs' wavelengths
    std::vector<int64_t> at(chosen.data_ptr<int64_t>(), chosen.data_ptr<int64_t>() + chosen.numel());
    cos = inspect::cosine_matrix(inspect::rotated_unit_rows(*model.rope, at));
    out["pos_norms"] = nlohmann::json::array();
    out["wavelengths"] = column(2.0 * M_PI / model.rope->frequencies(), 4);
  } else {
    const auto table = model.pos_emb->forward(T, 0).to(torch::kFloat64);  // (T,C), learned or sinusoidal
    cos = inspect::cosine_matrix(table.index_select(0, chosen));
    out["pos_norms"] = column(table.norm(2, 1), 4);
  }
  nlohmann::json matrix = nlohmann::json::array();
  for (int64_t i = 0; i < cos.size(0); ++i) matrix.push_back(column(cos[i], 3));
  out["cos"] = matrix;
  return out;
}

namespace {

// SHA-256 of every tensor before and after, and what the fine-tune's config froze.
nlohmann::json frozen_proof(const Sources& s, const checkpoint::LoadedCheckpoint& base) {
  std::map<std::string, torch::Tensor> before;
  for (auto& [name, p] : model::named_weights(*base.model)) before[name] = p;
  nlohmann::json tensors = nlohmann::json::array();
  for (auto& [name, p] : model::named_weights(*s.ck.model)) {
    const auto it = before.find(name);
    const bool comparable = it != before.end() && it->second.sizes() == p.sizes();
    tensors.push_back({{"name", name},
                       {"shape", c10::str(p.sizes())},
                       {"before", comparable ? train::tensor_sha256(it->second) : ""},
                       {"after", train::tensor_sha256(p)}});
    if (it != before.end() && p.dim() == 2 && it->second.dim() == 2 && p.size(0) > it->second.size(0)) {
      // a table grown by added pieces: its old rows compare with the base's whole table
      const int64_t old = it->second.size(0);
      tensors.push_back({{"name", name + " rows 0-" + std::to_string(old - 1)},
                         {"shape", c10::str(it->second.sizes())},
                         {"before", train::tensor_sha256(it->second)},
                         {"after", train::tensor_sha256(p.narrow(0, 0, old))}});
    }
  }
  nlohmann::json config = nlohmann::json::object();  // what the fine-tune meant to freeze (empty: a plain run)
  if (s.cfg && !s.cfg->finetune.from.empty()) {
    config["frozen prefixes"] = train::freeze_prefixes(s.cfg->finetune);
    config["unfrozen after step"] = s.cfg->finetune.unfreeze_embeddings_after;
    config["untie_head"] = s.cfg->finetune.untie_head;
    config["freeze_embeddings"] = train::to_string(s.cfg->finetune.freeze_embeddings);
  }
  return {{"tensors", tensors}, {"config", config}};
}

}  // namespace

nlohmann::json sentences_section(const Sources& s) {
  return run_json(s.run_dir / "sentence_vectors.json", "sentence-vector report");
}

nlohmann::json drift_section(const Sources& s, const checkpoint::LoadedCheckpoint& base, int top_k) {
  nlohmann::json reports = nlohmann::json::array();
  // rows a fine-tune added (new_pieces) are compared with their initial values, apart from the old rows
  auto start_of = [&](const torch::Tensor& before, const std::string& name) {
    return s.cfg ? train::added_rows_start(before, s.ck.tokenizer_model, s.cfg->finetune.new_rows_init, s.cfg->run.seed, name)
                 : torch::Tensor();
  };
  auto table = [&](const std::string& name, const torch::Tensor& before, const torch::Tensor& after) {
    for (const auto& r : inspect::table_drift(name, before, after, start_of(before, name), s.counts, *s.tok, top_k)) {
      reports.push_back(inspect::to_json(r));
    }
  };
  const auto& before = base.model->tok_emb->weight;
  const auto& after = s.ck.model->tok_emb->weight;
  table("tok_emb.weight", before, after);
  const int64_t old = std::min(before.size(0), after.size(0));
  auto rows = inspect::row_drift("tok_emb.weight", before, after.narrow(0, 0, old));
  if (after.size(0) > old) {  // the per-row column runs on through the added rows, against their start
    const auto added =
        inspect::row_drift("tok_emb.weight", start_of(before, "tok_emb.weight"), after.narrow(0, old, after.size(0) - old));
    rows = {torch::cat({rows.l2, added.l2}), torch::cat({rows.cos_drift, added.cos_drift})};
  }
  if (!s.ck.arch.tie_embeddings) {  // an untied head against the base's output projection, as `inspect drift`
    table("head.weight", base.model->output_weight(), s.ck.model->output_weight());
  }
  const nlohmann::json forgetting = run_json(s.run_dir / "forgetting.json", "forgetting report");
  nlohmann::json counts = nlohmann::json::array();
  for (int64_t c : s.counts) counts.push_back(c);
  return {{"base", base.dir.string()},        {"base_step", base.state.step},
          {"l2", column(rows.l2, 4)},         {"cos_drift", column(rows.cos_drift, 4)},
          {"counts", counts},                 {"counts_source", s.counts_source},
          {"reports", reports},               {"proof", frozen_proof(s, base)},
          {"forgetting", forgetting}};
}

nlohmann::json probs_section(const Sources& s, const std::string& prompt, int top_k) {
  const auto rows = inspect::teacher_forced(*s.ck.model.ptr(), *s.tok, sample::prompt_context(*s.tok, prompt), top_k);
  return {{"prompt", prompt}, {"rows", inspect::probs_json(rows)}};
}

nlohmann::json context_section(const Sources& s, const std::vector<std::string>& texts, const std::string& piece, int top_k) {
  auto& model = *s.ck.model.ptr();
  const auto ids = inspect::context_ids(model, *s.tok, texts, "--context-text");
  const int32_t id = inspect::context_pieces(*s.tok, ids, piece).front();
  auto out = inspect::context_json(inspect::context_report(model, *s.tok, ids, id, top_k, 5), false);
  out["texts"] = texts;
  return out;
}

}  // namespace lm::report
