// `lmtrain inspect ...`: read a checkpoint. drift (how far embedding rows moved between two checkpoints),
// probs (teacher-forced next-token table), neighbours (cosine neighbours, analogies, changes), positions.
// params and shapes (the architecture itself) are in cmd_inspect_model.cpp.
#include <spdlog/spdlog.h>

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "config/config.h"
#include "cli/commands.h"
#include "data/token_file.h"
#include "inspect/context.h"
#include "inspect/drift.h"
#include "inspect/geometry.h"
#include "inspect/probs.h"
#include "sample/sampler.h"
#include "train/finetune.h"
#include "util/errors.h"
#include "util/fs.h"
#include "util/hash.h"
#include "util/text.h"

namespace lm::cli {
namespace fs = std::filesystem;

namespace {

// "0,1,2" -> {0,1,2}; "0-3" -> {0,1,2,3}. ConfigError on anything else.
std::vector<int64_t> parse_int_list(const std::string& flag, const std::string& text) {
  std::vector<int64_t> out;
  try {
    for (const auto& item : util::split(text, ',')) {
      const auto dash = item.find('-', 1);
      size_t used = 0;
      if (dash == std::string::npos) {
        out.push_back(std::stoll(item, &used));
        if (used != item.size()) throw std::invalid_argument(item);
      } else {
        size_t used_b = 0;
        const std::string from = item.substr(0, dash), to = item.substr(dash + 1);
        const int64_t a = std::stoll(from, &used), b = std::stoll(to, &used_b);
        if (used != from.size() || used_b != to.size() || b < a || b - a >= 100000) throw std::invalid_argument(item);
        for (int64_t i = a; i <= b; ++i) out.push_back(i);
      }
    }
  } catch (const std::exception&) {
    throw ConfigError("[inspect] " + flag + ": expected numbers like 0,1,8 or ranges like 0-7 (under 100,000 long), got '" +
                      text + "'");
  }
  if (out.empty()) throw ConfigError("[inspect] " + flag + ": expected at least one number, got '" + text + "'");
  return out;
}

struct ReadOpts {
  std::string checkpoint, text, piece, analogy, compare, positions, dims, device = "cpu", precision = "fp32";
  int k = 5;
  bool json = false, exclude_self = false;
};

void print_probs(const ReadOpts& o) {
  auto ck = checkpoint::load_checkpoint(o.checkpoint, reading_ops(o.precision, o.device));
  move_to_device(*ck.model, o.device);
  tokenizer::Tokenizer tok(ck.tokenizer_model);
  warn_unknown_characters(tok, o.text, "--text");
  auto rows = inspect::teacher_forced(*ck.model, tok, sample::prompt_context(tok, o.text), o.k);
  if (o.json) {
    std::cout << inspect::probs_json(rows).dump(2) << "\n";
  } else {
    std::cout << "checkpoint " << ck.dir.string() << " (step " << ck.state.step << "); surprisal and entropy in bits\n"
              << inspect::format_probs(rows);
  }
}

void print_analogy(const ReadOpts& o, const tokenizer::Tokenizer& tok,
                   const std::vector<std::pair<std::string, torch::Tensor>>& tables) {
  const auto parts = util::split(o.analogy, ',');
  if (parts.size() != 3) throw ConfigError("[inspect] --analogy: expected a,b,c (three pieces), got '" + o.analogy + "'");
  std::vector<int32_t> ids;
  for (auto& p : parts) ids.push_back(inspect::find_piece(tok, p));
  for (auto& [name, table] : tables) {
    auto q = table[ids[0]] - table[ids[1]] + table[ids[2]];
    std::cout << inspect::format_neighbours(name + ": " + tok.piece(ids[0]) + " - " + tok.piece(ids[1]) + " + " +
                                                tok.piece(ids[2]) + " (the three excluded)",
                                            inspect::nearest(table, q, o.k, ids, tok));
  }
}

void print_neighbours(const ReadOpts& o) {
  if (o.piece.empty() == o.analogy.empty()) throw ConfigError("[inspect] neighbours: expected exactly one of --piece or --analogy");
  auto ck = checkpoint::load_checkpoint(o.checkpoint);
  tokenizer::Tokenizer tok(ck.tokenizer_model);
  std::vector<std::pair<std::string, torch::Tensor>> tables = {{"tok_emb.weight", ck.model->tok_emb->weight}};
  if (!ck.arch.tie_embeddings) tables.emplace_back("head.weight", ck.model->head->weight);
  if (!o.analogy.empty()) return print_analogy(o, tok, tables);
  const int32_t id = inspect::find_piece(tok, o.piece);
  const std::vector<int32_t> exclude = o.exclude_self ? std::vector<int32_t>{id} : std::vector<int32_t>{};
  if (!o.compare.empty()) {
    auto other = checkpoint::load_checkpoint(o.compare);
    if (util::sha256_file(other.tokenizer_model) != tok.sha256()) {
      throw CheckpointError("[inspect] --compare: expected a checkpoint with the same tokenizer as " + ck.dir.string());
    }
    auto a = inspect::nearest(ck.model->tok_emb->weight, ck.model->tok_emb->weight[id], o.k, exclude, tok);
    auto b = inspect::nearest(other.model->tok_emb->weight, other.model->tok_emb->weight[id], o.k, exclude, tok);
    std::cout << "neighbours of " << tok.piece(id) << " in tok_emb.weight: A = " << ck.dir.string() << " (step "
              << ck.state.step << "), B = " << other.dir.string() << " (step " << other.state.step << ")\n"
              << inspect::format_neighbour_change(a, b);
    return;
  }
  for (auto& [name, table] : tables) {
    std::cout << inspect::format_neighbours(name + ": nearest to " + tok.piece(id) + " (id " + std::to_string(id) + ")",
                                            inspect::nearest(table, table[id], o.k, exclude, tok));
  }
}

void print_positions(const ReadOpts& o) {
  auto ck = checkpoint::load_checkpoint(o.checkpoint);
  const int64_t T = ck.arch.max_seq_len;
  std::vector<int64_t> positions;
  if (o.positions.empty()) {
    for (int64_t p : {0, 1, 2, 4, 8, 16, 32, 64, 128, 256}) {
      if (p < T - 1) positions.push_back(p);
    }
    positions.push_back(T - 1);
  } else {
    positions = parse_int_list("--positions", o.positions);
  }
  std::cout << inspect::format_positions(*ck.model, positions, parse_int_list("--dims", o.dims.empty() ? "0-7" : o.dims));
}

struct ContextOpts {
  std::string checkpoint, piece, json;
  std::vector<std::string> texts;
  int k = 5, neighbours = 5;
};

void print_context(const ContextOpts& o) {
  if (o.texts.size() < 2 && o.piece.empty()) {
    throw ConfigError("[inspect] context: expected at least two --text (or one with a --piece that occurs twice in it), got " +
                      std::to_string(o.texts.size()));
  }
  if (!o.json.empty()) util::check_output_directory(o.json, "inspect", "--json");
  auto ck = checkpoint::load_checkpoint(o.checkpoint);
  tokenizer::Tokenizer tok(ck.tokenizer_model);
  for (size_t i = 0; i < o.texts.size(); ++i) warn_unknown_characters(tok, o.texts[i], "--text " + std::to_string(i + 1));
  const auto ids = inspect::context_ids(*ck.model, tok, o.texts);
  const auto pieces = inspect::context_pieces(tok, ids, o.piece);
  std::vector<inspect::ContextReport> reports;  // all of them before anything is printed: an error prints alone
  for (int32_t id : pieces) reports.push_back(inspect::context_report(*ck.model, tok, ids, id, o.k, o.neighbours));
  std::cout << "checkpoint " << ck.dir.string() << " (step " << ck.state.step << ")\n";
  nlohmann::json json = nlohmann::json::array();
  for (const auto& r : reports) {
    std::cout << "\n" << inspect::format_context(r, o.texts);
    if (!o.json.empty()) json.push_back(inspect::context_json(r, true));
  }
  if (!o.json.empty()) {
    util::atomic_write_file(o.json, nlohmann::json{{"checkpoint", ck.dir.string()}, {"step", ck.state.step}, {"texts", o.texts},
                                                   {"text_ids", ids}, {"pieces", json}}.dump(1) + "\n");
  }
}

void add_context_command(CLI::App& inspect) {
  auto o = std::make_shared<ContextOpts>();
  auto* cmd = inspect.add_subcommand("context", "One piece in several texts: its vector at every depth, the cosine between "
                                                "occurrences, the logit lens and the nearest rows (docs/inspect.md)");
  add_checkpoint_option(cmd, o->checkpoint, true);
  cmd->add_option("--text", o->texts, "a text (repeat it; a line start is implied before each)")->required();
  cmd->add_option("--piece", o->piece, "piece or word to follow (default: every piece shared by two or more texts)");
  cmd->add_option("-k,--top-k", o->k, "next pieces the logit lens lists per depth")->capture_default_str();
  cmd->add_option("--neighbours", o->neighbours, "nearest vocabulary rows listed per occurrence")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  cmd->add_option("--json", o->json, "also write the reports, with every vector, as JSON to this file");
  cmd->callback([o] { print_context(*o); });
}

// `inspect probs|neighbours|positions`.
void add_reading_commands(CLI::App& inspect) {
  auto o = std::make_shared<ReadOpts>();
  auto* probs = inspect.add_subcommand("probs", "Teacher-forced next-token table: one row per position of --text");
  add_checkpoint_option(probs, o->checkpoint, true);
  probs->add_option("--text", o->text, "text to score (a line start is implied)")->required();
  probs->add_option("-k,--top-k", o->k, "alternatives listed per position")->capture_default_str();
  probs->add_flag("--json", o->json, "print JSON instead of the table");
  add_device_option(probs, o->device);
  add_precision_option(probs, o->precision);  // fp32 by default: for reading exact probabilities
  probs->callback([o] { print_probs(*o); });

  auto* nb = inspect.add_subcommand("neighbours", "Cosine nearest neighbours of a piece in the token table (and an untied head)");
  add_checkpoint_option(nb, o->checkpoint, true);
  nb->add_option("--piece", o->piece, "piece or word (\"God\" finds \"\u2581God\")");
  nb->add_option("--analogy", o->analogy, "a,b,c: neighbours of a - b + c (a, b, c excluded)");
  nb->add_option("-k", o->k, "neighbours to list")->capture_default_str();
  nb->add_flag("--exclude-self", o->exclude_self, "leave the piece itself out of its list");
  nb->add_option("--compare", o->compare, "second checkpoint (same tokenizer): how the piece's list changed");
  nb->callback([o] { print_neighbours(*o); });

  auto* pos = inspect.add_subcommand("positions", "Position vectors, their similarity structure, and closeness to sinusoidal");
  add_checkpoint_option(pos, o->checkpoint, true);
  pos->add_option("--positions", o->positions, "positions to show, e.g. 0,1,2,64,127 (default: 0,1,2,4,8,16,32,64,T-1)");
  pos->add_option("--dims", o->dims, "dimensions to show, e.g. 0-7")->capture_default_str();
  pos->callback([o] { print_positions(*o); });
}

}  // namespace

void add_inspect_commands(CLI::App& app) {
  auto* inspect = app.add_subcommand("inspect", "Read a checkpoint: probs, neighbours, positions, context, params, shapes, drift");
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
  drift->add_option("-k,--top-k", o->top_k, "most-moved rows to list")->capture_default_str()->check(CLI::Range(0, 1 << 30));
  drift->add_option("--json", o->json, "also write the report as JSON to this file");
  drift->callback([o] {
    auto a = checkpoint::load_checkpoint(o->from), b = checkpoint::load_checkpoint(o->to);
    tokenizer::Tokenizer tok(b.tokenizer_model);
    if (!o->tokens.empty() && data::read_token_file_info(o->tokens).tokenizer_sha256 != tok.sha256()) {
      throw DataError("[inspect] --tokens: expected a token file made with the tokenizer of " + b.dir.string() + ", got " +
                      o->tokens + " (another tokenizer). Hint: use RUN/train.bin of the run that made --to.");
    }
    const auto counts = o->tokens.empty() ? std::vector<int64_t>{} : inspect::token_counts(o->tokens, b.arch.vocab_size);
    nlohmann::json out = nlohmann::json::array();
    std::vector<inspect::DriftReport> reports;
    // rows B's fine-tune added (finetune.new_pieces) against their initial values, as its config made them
    std::optional<config::RunConfig> b_cfg;
    try {
      b_cfg = config::parse_config(b.config_yaml, (b.dir / "config.yaml").string(), {});
    } catch (const ConfigError&) {
      // a config this version cannot read: tables of one size still compare
    }
    auto table = [&](const std::string& name, const torch::Tensor& before, const torch::Tensor& after) {
      const auto start = b_cfg ? train::added_rows_start(before, b.tokenizer_model, b_cfg->finetune.new_rows_init,
                                                         b_cfg->run.seed, name)
                               : torch::Tensor();
      for (auto& r : inspect::table_drift(name, before, after, start, counts, tok, o->top_k)) reports.push_back(std::move(r));
    };
    table("tok_emb.weight", a.model->tok_emb->weight, b.model->tok_emb->weight);
    if (!b.arch.tie_embeddings) {
      // an untied head is compared with A's output projection (its head, or its tied token table)
      table("head.weight", a.model->output_weight(), b.model->output_weight());
    }
    std::cout << "from " << a.dir.string() << " (step " << a.state.step << ") to " << b.dir.string() << " (step "
              << b.state.step << ")\n";
    for (auto& r : reports) {
      std::cout << inspect::format_drift(r);
      out.push_back(inspect::to_json(r));
    }
    if (!o->json.empty()) util::atomic_write_file(o->json, out.dump(2) + "\n");
  });
  add_reading_commands(*inspect);
  add_context_command(*inspect);
  add_model_reading_commands(*inspect);
}

}  // namespace lm::cli
