#include "config/config.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <sstream>

#include "util/errors.h"
#include "util/fs.h"

namespace lm::config {
namespace {

// One row per YAML key: how to read it into the struct (reporting problems) and how to write it back.
struct Field {
  std::string key;   // "section.key"
  std::string help;  // one line, also printed by `lmtrain train --help-config`
  std::function<void(RunConfig&, const YAML::Node&, const std::string& where, std::vector<std::string>& errs)> set;
  std::function<void(const RunConfig&, YAML::Emitter&)> emit;
};

template <typename T>
const char* type_name() {
  if constexpr (std::is_same_v<T, bool>) return "true or false";
  else if constexpr (std::is_floating_point_v<T>) return "a number";
  else if constexpr (std::is_unsigned_v<T>) return "a non-negative integer";
  else return "an integer";
}

template <typename T>
std::string show(T v) {
  std::ostringstream ss;
  ss << v;
  return ss.str();
}

// Numeric or boolean field with an inclusive range.
template <typename T>
Field scalar(std::string key, std::string help, std::function<T&(RunConfig&)> ref,
             T lo = std::numeric_limits<T>::lowest(), T hi = std::numeric_limits<T>::max()) {
  Field f;
  f.key = key;
  f.help = std::move(help);
  f.set = [key, ref, lo, hi](RunConfig& c, const YAML::Node& n, const std::string& where,
                             std::vector<std::string>& errs) {
    T v{};
    try {
      if (!n.IsScalar()) throw YAML::Exception(n.Mark(), "not a scalar");
      // yaml-cpp reads "-1" as a huge unsigned and "1.5" as int 1 in some versions: parse via long double.
      if constexpr (std::is_same_v<T, bool>) {
        v = n.as<bool>();
      } else {
        std::string s = n.Scalar();
        size_t used = 0;
        long double x = std::stold(s, &used);
        if (used != s.size() || !std::isfinite(x)) throw std::invalid_argument(s);
        if (x < static_cast<long double>(lo) || x > static_cast<long double>(hi)) {
          errs.push_back(key + where + ": expected a value in [" + show(lo) + ", " + show(hi) + "], got " + s);
          return;
        }
        if constexpr (std::is_integral_v<T>) {
          if (x != std::floor(x)) throw std::invalid_argument(s);  // in range, so the cast below is defined
        }
        v = static_cast<T>(x);
      }
    } catch (const std::exception&) {
      errs.push_back(key + where + ": expected " + type_name<T>() + ", got '" + (n.IsScalar() ? n.Scalar() : "a " + std::string(n.IsMap() ? "map" : "list")) + "'");
      return;
    }
    ref(c) = v;
  };
  f.emit = [ref](const RunConfig& c, YAML::Emitter& e) {
    if constexpr (std::is_same_v<T, bool>) {
      e << (ref(const_cast<RunConfig&>(c)) ? "true" : "false");
    } else {
      e << ref(const_cast<RunConfig&>(c));
    }
  };
  return f;
}

Field text(std::string key, std::string help, std::function<std::string&(RunConfig&)> ref) {
  Field f;
  f.key = key;
  f.help = std::move(help);
  f.set = [key, ref](RunConfig& c, const YAML::Node& n, const std::string& where, std::vector<std::string>& errs) {
    if (!n.IsScalar()) {
      errs.push_back(key + where + ": expected a string, got a " + (n.IsMap() ? "map" : "list"));
      return;
    }
    ref(c) = n.Scalar();
  };
  f.emit = [ref](const RunConfig& c, YAML::Emitter& e) { e << YAML::DoubleQuoted << ref(const_cast<RunConfig&>(c)); };
  return f;
}

// List of strings (YAML sequence; --set key=[a,b]).
Field text_list(std::string key, std::string help, std::function<std::vector<std::string>&(RunConfig&)> ref) {
  Field f;
  f.key = key;
  f.help = std::move(help);
  f.set = [key, ref](RunConfig& c, const YAML::Node& n, const std::string& where, std::vector<std::string>& errs) {
    if (!n.IsSequence()) {
      errs.push_back(key + where + ": expected a list of strings, e.g. [blocks.0., ln_f.]");
      return;
    }
    std::vector<std::string> v;
    for (const auto& item : n) {
      if (!item.IsScalar()) {
        errs.push_back(key + where + ": expected a list of strings, got a nested item");
        return;
      }
      v.push_back(item.Scalar());
    }
    ref(c) = v;
  };
  f.emit = [ref](const RunConfig& c, YAML::Emitter& e) {
    e << YAML::Flow << YAML::BeginSeq;
    for (const auto& s : ref(const_cast<RunConfig&>(c))) e << s;
    e << YAML::EndSeq;
  };
  return f;
}

// String field that becomes an enum: `parse` throws ConfigError for unknown spellings.
template <typename E>
Field choice(std::string key, std::string help, std::function<E&(RunConfig&)> ref, E (*parse)(std::string_view),
             std::string (*print)(E)) {
  Field f;
  f.key = key;
  f.help = std::move(help);
  f.set = [key, ref, parse](RunConfig& c, const YAML::Node& n, const std::string& where,
                            std::vector<std::string>& errs) {
    std::string s = n.IsScalar() ? n.Scalar() : "<not a scalar>";
    try {
      ref(c) = parse(s);
    } catch (const ConfigError& e) {
      std::string m = e.what();
      auto colon = m.find("expected");
      errs.push_back(key + where + ": " + (colon == std::string::npos ? m : m.substr(colon)));
    }
  };
  f.emit = [ref, print](const RunConfig& c, YAML::Emitter& e) { e << print(ref(const_cast<RunConfig&>(c))); };
  return f;
}

const std::vector<Field>& fields() {
  using I = int64_t;
  static const std::vector<Field> kFields = {
      text("run.dir", "run directory (tokenizer, token files, checkpoints)", [](RunConfig& c) -> std::string& { return c.run.dir; }),
      scalar<uint64_t>("run.seed", "seed for initialisation and batch sampling", [](RunConfig& c) -> uint64_t& { return c.run.seed; }),
      scalar<int>("run.threads", "compute threads (LibTorch + OpenBLAS)", [](RunConfig& c) -> int& { return c.run.threads; }, 1, 256),
      text("data.train", "training text file", [](RunConfig& c) -> std::string& { return c.data.train; }),
      text("data.val", "validation text file", [](RunConfig& c) -> std::string& { return c.data.val; }),
      scalar<int>("tokenizer.vocab_size", "SentencePiece vocabulary size (= model rows V)", [](RunConfig& c) -> int& { return c.tokenizer.vocab_size; }, 8, 1000000),
      choice<tokenizer::ModelType>("tokenizer.model_type", "bpe | unigram", [](RunConfig& c) -> tokenizer::ModelType& { return c.tokenizer.model_type; }, tokenizer::parse_model_type, tokenizer::to_string),
      scalar<double>("tokenizer.character_coverage", "fraction of characters the vocabulary covers", [](RunConfig& c) -> double& { return c.tokenizer.character_coverage; }, 0.5, 1.0),
      scalar<I>("tokenizer.max_sentences", "lines sampled to train the tokenizer (0 = all)", [](RunConfig& c) -> I& { return c.tokenizer.max_sentences; }, 0),
      scalar<I>("model.d_model", "width C of token vectors", [](RunConfig& c) -> I& { return c.model.d_model; }, 1, 65536),
      scalar<I>("model.n_layers", "transformer blocks L", [](RunConfig& c) -> I& { return c.model.n_layers; }, 1, 1024),
      scalar<I>("model.n_heads", "attention heads H (divides d_model)", [](RunConfig& c) -> I& { return c.model.n_heads; }, 1, 1024),
      scalar<I>("model.max_seq_len", "context length T in tokens", [](RunConfig& c) -> I& { return c.model.max_seq_len; }, 1, 1 << 20),
      scalar<I>("model.mlp_ratio", "MLP hidden width / d_model", [](RunConfig& c) -> I& { return c.model.mlp_ratio; }, 1, 64),
      choice<model::Positions>("model.positions", "learned | sinusoidal", [](RunConfig& c) -> model::Positions& { return c.model.positions; }, model::parse_positions, model::to_string),
      scalar<bool>("model.tie_embeddings", "logits through the token table (true) or a separate head", [](RunConfig& c) -> bool& { return c.model.tie_embeddings; }),
      choice<model::EmbeddingScale>("model.embedding_scale", "none | sqrt_d", [](RunConfig& c) -> model::EmbeddingScale& { return c.model.embedding_scale; }, model::parse_embedding_scale, model::to_string),
      scalar<I>("train.batch_size", "sequences per micro-batch per process", [](RunConfig& c) -> I& { return c.train.batch_size; }, 1, 1 << 20),
      scalar<I>("train.grad_accum", "micro-batches per optimizer step", [](RunConfig& c) -> I& { return c.train.grad_accum; }, 1, 1 << 20),
      scalar<I>("train.max_steps", "optimizer steps", [](RunConfig& c) -> I& { return c.train.max_steps; }, 1),
      scalar<double>("train.lr", "peak learning rate", [](RunConfig& c) -> double& { return c.train.lr; }, 1e-12, 10.0),
      scalar<double>("train.min_lr", "learning rate at the end of the cosine decay", [](RunConfig& c) -> double& { return c.train.min_lr; }, 0.0, 10.0),
      scalar<I>("train.warmup_steps", "linear warmup steps", [](RunConfig& c) -> I& { return c.train.warmup_steps; }, 0),
      scalar<double>("train.weight_decay", "AdamW weight decay on 2-D matmul weights", [](RunConfig& c) -> double& { return c.train.weight_decay; }, 0.0, 10.0),
      scalar<double>("train.beta1", "AdamW beta1", [](RunConfig& c) -> double& { return c.train.beta1; }, 0.0, 0.999999),
      scalar<double>("train.beta2", "AdamW beta2", [](RunConfig& c) -> double& { return c.train.beta2; }, 0.0, 0.999999),
      scalar<double>("train.eps", "AdamW epsilon", [](RunConfig& c) -> double& { return c.train.eps; }, 1e-30, 1.0),
      scalar<double>("train.grad_clip", "global gradient-norm clip (0 = off)", [](RunConfig& c) -> double& { return c.train.grad_clip; }, 0.0),
      scalar<I>("train.eval_every", "steps between validations (0 = end only)", [](RunConfig& c) -> I& { return c.train.eval_every; }, 0),
      scalar<I>("train.eval_batches", "batches per periodic validation", [](RunConfig& c) -> I& { return c.train.eval_batches; }, 1),
      scalar<I>("train.log_every", "steps between log lines", [](RunConfig& c) -> I& { return c.train.log_every; }, 1),
      scalar<I>("train.early_stopping_patience", "validations without improvement before stopping (0 = off)", [](RunConfig& c) -> I& { return c.train.early_stopping_patience; }, 0),
      choice<train::NonFinitePolicy>("train.on_nonfinite", "stop | skip a step whose loss or grad norm is NaN/Inf", [](RunConfig& c) -> train::NonFinitePolicy& { return c.train.on_nonfinite; }, train::parse_nonfinite_policy, train::to_string),
      scalar<I>("train.max_skips", "consecutive skipped steps allowed with on_nonfinite: skip", [](RunConfig& c) -> I& { return c.train.max_skips; }, 0),
      text("finetune.from", "starting checkpoint of `lmtrain finetune` (set by --from)", [](RunConfig& c) -> std::string& { return c.finetune.from; }),
      scalar<bool>("finetune.freeze_embeddings", "freeze the token table (tied head: the output projection too)", [](RunConfig& c) -> bool& { return c.finetune.freeze_embeddings; }),
      scalar<bool>("finetune.freeze_positions", "freeze learned positions", [](RunConfig& c) -> bool& { return c.finetune.freeze_positions; }),
      text_list("finetune.freeze", "further parameter-name prefixes to freeze", [](RunConfig& c) -> std::vector<std::string>& { return c.finetune.freeze; }),
      scalar<bool>("finetune.untie_head", "copy a tied head out of the token table so it can train on its own", [](RunConfig& c) -> bool& { return c.finetune.untie_head; }),
      scalar<double>("finetune.embedding_lr_scale", "lr multiplier of trainable token/position embeddings", [](RunConfig& c) -> double& { return c.finetune.embedding_lr_scale; }, 1e-6, 10.0),
      scalar<I>("finetune.unfreeze_embeddings_after", "unfreeze the frozen embeddings after this many steps (0 = never)", [](RunConfig& c) -> I& { return c.finetune.unfreeze_embeddings_after; }, 0),
      text("finetune.original_val", "original corpus val text for the forgetting report (\"\" = the checkpoint's data.val)", [](RunConfig& c) -> std::string& { return c.finetune.original_val; }),
      scalar<I>("finetune.drift_every", "steps between drift reports (0 = end only)", [](RunConfig& c) -> I& { return c.finetune.drift_every; }, 0),
      scalar<I>("finetune.drift_top_k", "most-moved pieces listed", [](RunConfig& c) -> I& { return c.finetune.drift_top_k; }, 0, 10000),
      scalar<I>("checkpoint.every", "steps between checkpoints (0 = final only)", [](RunConfig& c) -> I& { return c.checkpoint.every; }, 0),
      scalar<I>("checkpoint.keep_last", "step checkpoints kept on disk (plus `best`)", [](RunConfig& c) -> I& { return c.checkpoint.keep_last; }, 2),
  };
  return kFields;
}

const Field* find_field(const std::string& key) {
  for (const auto& f : fields()) {
    if (f.key == key) return &f;
  }
  return nullptr;
}

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
  for (const auto& sec : root) {
    const std::string section = sec.first.as<std::string>();
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
      const std::string key = section + "." + kv.first.as<std::string>();
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

void validate(const RunConfig& c, std::vector<std::string>& errs) {
  for (auto& p : c.model.problems()) {
    if (p.rfind("model.vocab_size", 0) != 0) errs.push_back(p);
  }
  if (c.data.train.empty()) errs.push_back("data.train: expected a path to a training text file, got nothing");
  if (c.data.val.empty()) errs.push_back("data.val: expected a path to a validation text file, got nothing");
  if (c.run.dir.empty()) errs.push_back("run.dir: expected a directory path, got nothing");
  if (c.train.min_lr > c.train.lr) {
    errs.push_back("train.min_lr: expected <= train.lr=" + show(c.train.lr) + ", got " + show(c.train.min_lr));
  }
  if (c.finetune.unfreeze_embeddings_after > 0 && !c.finetune.freeze_embeddings && !c.finetune.freeze_positions) {
    errs.push_back("finetune.unfreeze_embeddings_after: expected finetune.freeze_embeddings or finetune.freeze_positions "
                   "to be true (nothing to unfreeze), got both false");
  }
  if (c.finetune.unfreeze_embeddings_after >= c.train.max_steps) {
    errs.push_back("finetune.unfreeze_embeddings_after: expected < train.max_steps=" + show(c.train.max_steps) +
                   " (the embeddings would never train), got " + show(c.finetune.unfreeze_embeddings_after));
  }
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
  } catch (const YAML::Exception& e) {
    throw ConfigError("[config] " + origin + " is not valid YAML: " + e.what());
  }
  return build(&root, origin, overrides);
}

RunConfig load_config(const std::filesystem::path& yaml_path, const std::vector<std::string>& overrides) {
  if (yaml_path.empty()) return build(nullptr, "", overrides);
  if (!std::filesystem::is_regular_file(yaml_path)) {
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

std::vector<std::pair<std::string, std::string>> config_keys() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& f : fields()) out.emplace_back(f.key, f.help);
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
