#include "inspect/params.h"

#include <cstdio>

#include "util/text.h"

namespace lm::inspect {

const std::vector<Dtype>& dtypes() {
  static const std::vector<Dtype> d = {{"fp32", 4}, {"fp16", 2}, {"bf16", 2}};
  return d;
}

ParamCount count_params(const model::GptConfig& cfg) {
  const int64_t V = cfg.vocab_size, C = cfg.d_model, T = cfg.max_seq_len, Hd = cfg.mlp_ratio * C;
  ParamCount pc;
  auto add = [&](const std::string& name, const std::string& shapes, int64_t n) {
    pc.lines.push_back({name, shapes, n});
    pc.total += n;
  };
  auto s = [](int64_t a, int64_t b) { return std::to_string(a) + " x " + std::to_string(b); };
  pc.embedding = V * C;
  add("tok_emb", s(V, C), pc.embedding);
  if (cfg.positions == model::Positions::kLearned) {
    pc.positions = T * C;
    add("pos_emb", s(T, C), pc.positions);
  }
  const int64_t b = cfg.bias ? 1 : 0;  // the linear layers' biases
  const int64_t ln = 2 * C, attn = 3 * C * C + b * 3 * C + C * C + b * C, mlp = C * Hd + b * Hd + Hd * C + b * C;
  pc.per_block = 2 * ln + attn + mlp;
  auto bias = [&](int64_t n) { return cfg.bias ? " + " + std::to_string(n) : std::string(); };
  for (int64_t i = 0; i < cfg.n_layers; ++i) {
    const std::string blk = "blocks." + std::to_string(i) + ".";
    add(blk + "ln1", "2 x " + std::to_string(C), ln);
    add(blk + "attn", "qkv " + s(3 * C, C) + bias(3 * C) + ", proj " + s(C, C) + bias(C), attn);
    add(blk + "ln2", "2 x " + std::to_string(C), ln);
    add(blk + "mlp", "fc " + s(Hd, C) + bias(Hd) + ", proj " + s(C, Hd) + bias(C), mlp);
  }
  add("ln_f", "2 x " + std::to_string(C), ln);
  pc.tying_saving = V * C;
  if (!cfg.tie_embeddings) {
    pc.untied_head = V * C;
    add("head", s(V, C), pc.untied_head);
  }
  return pc;
}

std::string format_params(const model::GptConfig& cfg, const ParamCount& pc) {
  std::string out;
  char buf[512];
  auto pct = [&](int64_t n) { return 100.0 * static_cast<double>(n) / static_cast<double>(pc.total); };
  std::snprintf(buf, sizeof buf, "%-16s %-48s %14s %7s\n", "module", "shape", "parameters", "share");
  out += buf;
  for (const auto& l : pc.lines) {
    // blocks beyond the first are summarised (they are identical), just before ln_f
    if (l.name.rfind("blocks.", 0) == 0 && l.name.rfind("blocks.0.", 0) != 0) continue;
    if (l.name == "ln_f" && cfg.n_layers > 1) {
      const int64_t more = pc.per_block * (cfg.n_layers - 1);
      std::snprintf(buf, sizeof buf, "%-16s %-48s %14s %6.2f%%\n", ("blocks.1-" + std::to_string(cfg.n_layers - 1)).c_str(),
                    (std::to_string(cfg.n_layers - 1) + " more blocks like blocks.0").c_str(), util::with_commas(more).c_str(), pct(more));
      out += buf;
    }
    std::snprintf(buf, sizeof buf, "%-16s %-48s %14s %6.2f%%\n", l.name.c_str(), l.shapes.c_str(),
                  util::with_commas(l.count).c_str(), pct(l.count));
    out += buf;
  }
  std::snprintf(buf, sizeof buf, "%-16s %-48s %14s\n\n", "total", "", util::with_commas(pc.total).c_str());
  out += buf;
  const int64_t emb_all = pc.embedding + pc.positions + pc.untied_head;
  std::snprintf(buf, sizeof buf,
                "embeddings: token table %s (%.1f%%)%s%s; all embedding-like tensors %s (%.1f%%); %d blocks %s (%.1f%%)\n",
                util::with_commas(pc.embedding).c_str(), pct(pc.embedding),
                pc.positions ? (", positions " + util::with_commas(pc.positions)).c_str() : "",
                pc.untied_head ? (", untied head " + util::with_commas(pc.untied_head)).c_str() : "", util::with_commas(emb_all).c_str(),
                pct(emb_all), static_cast<int>(cfg.n_layers), util::with_commas(pc.per_block * cfg.n_layers).c_str(),
                pct(pc.per_block * cfg.n_layers));
  out += buf;
  if (cfg.tie_embeddings) {
    std::snprintf(buf, sizeof buf, "tied head: the logits reuse tok_emb; untying would add %s parameters (+%.1f%%)\n",
                  util::with_commas(pc.tying_saving).c_str(), pct(pc.tying_saving));
  } else {
    std::snprintf(buf, sizeof buf, "untied head: tying would save %s parameters (%.1f%% of this model)\n",
                  util::with_commas(pc.tying_saving).c_str(), pct(pc.tying_saving));
  }
  out += buf;
  std::snprintf(buf, sizeof buf, "\n%-6s %14s %28s\n", "dtype", "weights", "training (w + grad + AdamW m,v)");
  out += buf;
  for (const auto& d : dtypes()) {
    const double w = static_cast<double>(pc.total) * d.bytes;
    std::snprintf(buf, sizeof buf, "%-6s %14s %28s\n", d.name, util::mib(w).c_str(), util::mib(4.0 * w).c_str());
    out += buf;
  }
  out += "(activations not included; they grow with batch x seq_len)\n";
  return out;
}

std::string format_table_arithmetic(int64_t vocab, int64_t d_model) {
  const int64_t n = vocab * d_model;
  std::string out = "token table: " + util::with_commas(vocab) + " x " + util::with_commas(d_model) + " = " + util::with_commas(n) + " parameters";
  char buf[128];
  std::snprintf(buf, sizeof buf, " (%.1f M)\n", static_cast<double>(n) / 1e6);
  out += buf;
  for (const auto& d : dtypes()) {
    out += "  " + std::string(d.name) + ": " + util::with_commas(n * d.bytes) + " bytes = " + util::mib(static_cast<double>(n) * d.bytes) +
           "; training (w + grad + AdamW m,v) " + util::mib(4.0 * static_cast<double>(n) * d.bytes) + "\n";
  }
  out += "  a tied head reuses it; an untied head doubles it\n";
  return out;
}

}  // namespace lm::inspect
