// `lmtrain inspect drift --from A --to B`: how far the embedding rows moved between two checkpoints.
#include <iostream>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "cli/app.h"
#include "inspect/drift.h"
#include "util/fs.h"

namespace lm::cli {

void add_inspect_commands(CLI::App& app) {
  auto* inspect = app.add_subcommand("inspect", "Read a checkpoint: embedding drift");
  inspect->require_subcommand(1);
  struct Opts {
    std::string from, to, tokens, json;
    int top_k = 10;
  };
  auto o = std::make_shared<Opts>();
  auto* drift = inspect->add_subcommand("drift", "Per-row L2/cosine drift of tok_emb (and an untied head) from A to B");
  drift->add_option("--from", o->from, "starting checkpoint (or run directory)")->required();
  drift->add_option("--to", o->to, "later checkpoint (or run directory)")->required();
  drift->add_option("--tokens", o->tokens, "token file whose id counts mark seen/unseen rows (e.g. RUN/train.bin)");
  drift->add_option("-k,--top-k", o->top_k, "most-moved rows to list")->capture_default_str()->check(CLI::NonNegativeNumber);
  drift->add_option("--json", o->json, "also write the report as JSON to this file");
  drift->callback([o] {
    auto a = checkpoint::load_checkpoint(o->from), b = checkpoint::load_checkpoint(o->to);
    tokenizer::Tokenizer tok(b.tokenizer_model);
    const auto counts = o->tokens.empty() ? std::vector<int64_t>{} : inspect::token_counts(o->tokens, b.arch.vocab_size);
    nlohmann::json out = nlohmann::json::array();
    std::vector<inspect::DriftReport> reports;
    reports.push_back(inspect::drift_report("tok_emb.weight", a.model->tok_emb->weight, b.model->tok_emb->weight, counts,
                                            tok, o->top_k));
    if (!b.arch.tie_embeddings) {
      // an untied head is compared with A's output projection (its head, or its tied token table)
      reports.push_back(inspect::drift_report("head.weight", a.model->output_weight(), b.model->output_weight(), counts,
                                              tok, o->top_k));
    }
    std::cout << "from " << a.dir.string() << " (step " << a.state.step << ") to " << b.dir.string() << " (step "
              << b.state.step << ")\n";
    for (auto& r : reports) {
      std::cout << inspect::format_drift(r);
      out.push_back(inspect::to_json(r));
    }
    if (!o->json.empty()) util::atomic_write_file(o->json, out.dump(2) + "\n");
  });
}

}  // namespace lm::cli
