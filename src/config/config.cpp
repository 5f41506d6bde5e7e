#include "config/config.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <limits>
#include <map>

#include "config/fields.h"
#include "util/errors.h"
#include "util/fs.h"

namespace lm::config {
namespace {

std::string suggest(const std::string& key) {
  std::string best;
  size_t best_d = std::numeric_limits<size_t>::max();
  if (key.find('.') == std::string::npos) {  // a section name
    for (const auto& f : fields()) {
      const std::string section = f.key.substr(0, f.key.find('.'));
      if (size_t d = edit_distance(key, section); d < best_d) {
        best_d = d;
        best = section;
      }
    }
    return best_d <= 2 ? ". Did you mean '" + best + "'?" : "";
  }
  for (const auto& f : fields()) {
    // Compare both the dotted key and its last part, so a right key in the wrong section is found too.
    size_t d = edit_distance(key, f.key);
    auto dot = key.find('.');
    if (dot != std::string::npos) d = std::min(d, edit_distance(key.substr(dot + 1), f.key.substr(f.key.find('.') + 1)) + 1);
    if (d < best_d) {
      best_d = d;
      best = f.key;
    }
  }
  return best_d <= std::max<size_t>(3, key.size() / 3) ? ". Did you mean '" + best + "'?" : "";
}

std::string at(const YAML::Mark& m, const std::string& origin) {
  if (m.line < 0) return " (" + origin + ")";
  return " (" + origin + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1) + ")";
}

void apply_yaml(RunConfig& cfg, const YAML::Node& root, const std::string& origin, std::vector<std::string>& errs) {
  if (!root || root.IsNull()) return;
  if (!root.IsMap()) {
    errs.push_back(origin + ": expected a map of sections (run, data, tokenizer, model, train, checkpoint)");
    return;
  }
  std::map<std::string, int> first_line;  // "section" and "section.key" -> line where it first appeared
  auto duplicate = [&](const std::string& name, const YAML::Node& key) {
    auto [it, fresh] = first_line.emplace(name, key.Mark().line + 1);
    if (!fresh) {
      errs.push_back("duplicate key '" + name + "'" + at(key.Mark(), origin) + ": expected each key once, first at line " +
                     std::to_string(it->second));
    }
    return !fresh;
  };
  for (const auto& sec : root) {
    if (!sec.first.IsScalar()) {
      errs.push_back("a key" + at(sec.first.Mark(), origin) + ": expected a section name, got a " +
                     (sec.first.IsMap() ? "map" : sec.first.IsSequence() ? "list" : "null"));
      continue;
    }
    const std::string section = sec.first.as<std::string>();
    if (duplicate(section, sec.first)) continue;
    if (!sec.second.IsMap()) {
      bool known = false;
      for (const auto& f : fields()) known = known || f.key.rfind(section + ".", 0) == 0;
      errs.push_back(known ? "section '" + section + "'" + at(sec.first.Mark(), origin) + ": expected a map of keys"
                           : "unknown key '" + section + "'" + at(sec.first.Mark(), origin) + suggest(section));
      continue;
    }
    bool known_section = false;
    for (const auto& f : fields()) known_section = known_section || f.key.rfind(section + ".", 0) == 0;
    if (!known_section) {
      errs.push_back("unknown section '" + section + "'" + at(sec.first.Mark(), origin) + suggest(section));
      continue;
    }
    for (const auto& kv : sec.second) {
      if (!kv.first.IsScalar()) {
        errs.push_back("a key of '" + section + "'" + at(kv.first.Mark(), origin) + ": expected a key name");
        continue;
      }
      const std::string key = section + "." + kv.first.as<std::string>();
      if (duplicate(key, kv.first)) continue;
      const Field* f = find_field(key);
      if (!f) {
        errs.push_back("unknown key '" + key + "'" + at(kv.first.Mark(), origin) + suggest(key));
        continue;
      }
      f->set(cfg, kv.second, at(kv.second.Mark(), origin), errs);
      cfg.explicit_keys.insert(key);
    }
  }
}

void apply_overrides(RunConfig& cfg, const std::vector<std::string>& overrides, std::vector<std::string>& errs) {
  for (const auto& o : overrides) {
    auto eq = o.find('=');
    if (eq == std::string::npos) {
      errs.push_back("--set '" + o + "': expected section.key=value");
      continue;
    }
    const std::string key = o.substr(0, eq);
    const Field* f = find_field(key);
    if (!f) {
      errs.push_back("unknown key '" + key + "' (--set)" + suggest(key));
      continue;
    }
    YAML::Node n;
    try {
      n = YAML::Load(o.substr(eq + 1));
    } catch (const YAML::Exception&) {
      n = YAML::Node(o.substr(eq + 1));
    }
    if (!n.IsDefined() || n.IsNull()) n = YAML::Node(o.substr(eq + 1));
    f->set(cfg, n, " (--set)", errs);
    cfg.explicit_keys.insert(key);
  }
}

// finetune.objective contrastive: where its pairs come from, and keys that only it reads.
void validate_contrastive(const RunConfig& c, std::vector<std::string>& errs) {
  const auto& f = c.finetune;
  if (f.objective != train::Objective::kContrastive) {
    if (!f.pairs.empty() || !f.val_pairs.empty() || f.positives != train::Positives::kNone || f.lm_weight > 0) {
      errs.push_back("finetune.pairs, val_pairs, positives and lm_weight: expected finetune.objective contrastive "
                     "(they choose its pairs and weights), got objective " + train::to_string(f.objective));
    }
    return;
  }
  if (f.pairs.empty() == (f.positives == train::Positives::kNone)) {
    errs.push_back("finetune.objective contrastive: expected its positives from finetune.pairs (a TSV file) or "
                   "finetune.positives next_line, got " + std::string(f.pairs.empty() ? "neither" : "both"));
  }
  if (!f.pairs.empty() && f.val_pairs.empty()) {
    errs.push_back("finetune.val_pairs: expected held-out pairs (the same TSV format) with finetune.pairs, for "
                   "validation and the retrieval report, got nothing");
  }
  if (f.pairs.empty() && !f.val_pairs.empty()) {
    errs.push_back("finetune.val_pairs: expected finetune.pairs with it (next_line validates on data.val's lines), "
                   "got '" + f.val_pairs + "' alone");
  }
  if (c.train.batch_size < 2) {
    errs.push_back("train.batch_size: expected >= 2 with finetune.objective contrastive (the other pairs of a batch "
                   "are each line's negatives), got " + show(c.train.batch_size));
  }
}

void validate(const RunConfig& c, std::vector<std::string>& errs) {
  for (auto& p : c.model.problems()) {
    if (p.rfind("model.vocab_size", 0) != 0) errs.push_back(p);
  }
  if (c.data.train.empty()) errs.push_back("data.train: expected a path to a training text file, got nothing");
  if (c.data.val.empty() && c.data.val_fraction <= 0.0) {
    errs.push_back("data.val_fraction: expected > 0 when data.val is empty (a run needs validation text), got " +
                   show(c.data.val_fraction));
  }
  if (c.run.dir.empty()) errs.push_back("run.dir: expected a directory path, got nothing");
  if (c.train.min_lr > c.train.lr) {
    errs.push_back("train.min_lr: expected <= train.lr=" + show(c.train.lr) + ", got " + show(c.train.min_lr));
  }
  const bool emb_frozen = c.finetune.freeze_embeddings != train::EmbeddingFreeze::kNone;
  if (c.finetune.unfreeze_embeddings_after > 0 && !emb_frozen && !c.finetune.freeze_positions) {
    errs.push_back("finetune.unfreeze_embeddings_after: expected finetune.freeze_embeddings (true or old) or "
                   "finetune.freeze_positions (nothing to unfreeze), got neither");
  }
  const bool extends = c.finetune.new_pieces > 0 || !c.finetune.new_pieces_from.empty();
  if (c.finetune.new_pieces > 0 && !c.finetune.new_pieces_from.empty()) {
    errs.push_back("finetune.new_pieces: expected it or finetune.new_pieces_from, got both (" +
                   show(c.finetune.new_pieces) + " and '" + c.finetune.new_pieces_from + "')");
  }
  if (c.finetune.freeze_embeddings == train::EmbeddingFreeze::kOld) {
    for (const auto& prefix : c.finetune.freeze) {
      if (std::string("tok_emb.weight").rfind(prefix, 0) == 0) {
        errs.push_back("finetune.freeze: expected no prefix of tok_emb.weight with freeze_embeddings old (its added rows "
                       "train), got '" + prefix + "'");
      }
    }
  }
  if (c.finetune.freeze_embeddings == train::EmbeddingFreeze::kOld && !extends) {
    errs.push_back("finetune.freeze_embeddings: old freezes the rows of the checkpoint's pieces and trains the added "
                   "ones: expected finetune.new_pieces or finetune.new_pieces_from, got neither");
  }
  if (c.finetune.unfreeze_embeddings_after >= c.train.max_steps) {
    errs.push_back("finetune.unfreeze_embeddings_after: expected < train.max_steps=" + show(c.train.max_steps) +
                   " (the embeddings would never train), got " + show(c.finetune.unfreeze_embeddings_after));
  }
  validate_contrastive(c, errs);
  if (c.train.warmup_steps > c.train.max_steps) {
    errs.push_back("train.warmup_steps: expected <= train.max_steps=" + show(c.train.max_steps) + ", got " +
                   show(c.train.warmup_steps));
  }
}

RunConfig build(const YAML::Node* root, const std::string& origin, const std::vector<std::string>& overrides) {
  RunConfig cfg;
  std::vector<std::string> errs;
  if (root) apply_yaml(cfg, *root, origin, errs);
  apply_overrides(cfg, overrides, errs);
  // model.embedding_init_std follows model.init_std unless it is given itself.
  if (!cfg.explicit_keys.count("model.embedding_init_std")) cfg.model.embedding_init_std = cfg.model.init_std;
  if (errs.empty()) validate(cfg, errs);
  if (!errs.empty()) {
    std::string msg = "[config] " + std::to_string(errs.size()) + " problem" + (errs.size() > 1 ? "s" : "") + ": ";
    for (size_t i = 0; i < errs.size(); ++i) msg += (i ? "\n  " : "") + errs[i];
    throw ConfigError(msg);
  }
  return cfg;
}

}  // namespace

RunConfig parse_config(const std::string& yaml_text, const std::string& origin, const std::vector<std::string>& overrides) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::DeepRecursion& e) {  // yaml-cpp's own limit keeps the parser's stack bounded
    throw ConfigError("[config] " + origin + " is nested too deeply: expected a map of sections with flat keys, got " +
                      std::to_string(e.depth()) + " levels by line " + std::to_string(e.mark.line + 1));
  } catch (const YAML::Exception& e) {
    throw ConfigError("[config] " + origin + " is not valid YAML: " + e.what());
  }
  return build(&root, origin, overrides);
}

train::FinetuneConfig checkpoint_finetune(const std::string& yaml) {
  try {
    return parse_config(yaml, "checkpoint config", {}).finetune;
  } catch (const ConfigError&) {
    return {};
  }
}

RunConfig load_config(const std::filesystem::path& yaml_path, const std::vector<std::string>& overrides) {
  if (yaml_path.empty()) return build(nullptr, "", overrides);
  if (const auto p = util::read_problem(yaml_path); p && p->denied) {
    throw ConfigError("[config] config file '" + yaml_path.string() + "' " + p->what + ". " + p->hint);
  }
  std::error_code ec;
  if (std::filesystem::is_directory(yaml_path, ec)) {
    throw ConfigError("[config] config file '" + yaml_path.string() + "' is a directory: expected a YAML file");
  }
  if (!std::filesystem::is_regular_file(yaml_path, ec)) {
    throw ConfigError("[config] config file missing: expected a YAML file, got '" + yaml_path.string() + "'");
  }
  return parse_config(util::read_file(yaml_path, "config"), yaml_path.string(), overrides);
}

std::string dump_config(const RunConfig& cfg) {
  YAML::Emitter e;
  e << YAML::BeginMap;
  std::string section;
  for (const auto& f : fields()) {
    const std::string s = f.key.substr(0, f.key.find('.'));
    if (s != section) {
      if (!section.empty()) e << YAML::EndMap;
      e << YAML::Key << s << YAML::Value << YAML::BeginMap;
      section = s;
    }
    e << YAML::Key << f.key.substr(f.key.find('.') + 1) << YAML::Value;
    f.emit(cfg, e);
    e << YAML::Comment(f.help);
  }
  if (!section.empty()) e << YAML::EndMap;
  e << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

std::vector<std::tuple<std::string, std::string, std::string>> diff_configs(const RunConfig& a, const RunConfig& b) {
  std::vector<std::tuple<std::string, std::string, std::string>> out;
  for (const auto& f : fields()) {
    YAML::Emitter ea, eb;
    f.emit(a, ea);
    f.emit(b, eb);
    if (std::string(ea.c_str()) != std::string(eb.c_str())) out.emplace_back(f.key, ea.c_str(), eb.c_str());
  }
  return out;
}

std::vector<KeyInfo> config_keys() {
  const RunConfig defaults;
  std::vector<KeyInfo> out;
  for (const auto& f : fields()) {
    YAML::Emitter e;
    f.emit(defaults, e);
    out.push_back({f.key, e.c_str(), f.help});
  }
  return out;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace lm::config
