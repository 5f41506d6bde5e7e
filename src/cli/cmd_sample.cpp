// `lmtrain sample`: next-token probability table for a prompt, and optional generation.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "checkpoint/checkpoint.h"
#include "config/config.h"
#include "cli/commands.h"
#include "model/huge_pages.h"
#include "model/make_ops.h"
#include "sample/sampler.h"
#include "util/device.h"
#include "util/errors.h"
#include "util/text.h"
#include "util/threads.h"

namespace lm::cli {
namespace {

// Decodes ids, rendering each end-of-line id as a newline (the tokenizer itself drops it).
std::string render(const tokenizer::Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::string out;
  std::vector<int32_t> run;
  for (int32_t id : ids) {
    if (id == tok.eos_id()) {
      out += tok.decode(run) + "\n";
      run.clear();
    } else {
      run.push_back(id);
    }
  }
  return out + tok.decode(run);
}

// The prompt as printed before a sample: as written, each character the tokenizer does not know shown as its
// code point, "<U+D55C>" (the model read it as <unk>; SentencePiece's decoding would print "⁇"), and a byte that
// is not UTF-8 as "<0xE4>".
std::string shown_prompt(const tokenizer::Tokenizer& tok, const std::string& prompt) {
  const auto unknown = tok.unknown_characters(prompt);
  std::string out;
  for (size_t i = 0; i < prompt.size();) {
    const auto b = static_cast<unsigned char>(prompt[i]);
    const size_t n = b < 0x80 ? 1 : b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
    char32_t cp = n == 1 ? b : b & (0x7F >> n);
    bool ok = n > 0 && i + n <= prompt.size();
    for (size_t k = 1; ok && k < n; ++k) {
      const auto c = static_cast<unsigned char>(prompt[i + k]);
      ok = (c & 0xC0) == 0x80;
      cp = (cp << 6) | (c & 0x3F);
    }
    ok = ok && (n < 3 || cp >= (n == 3 ? 0x800u : 0x10000u)) && cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF);
    char buf[16];
    if (!ok) {
      std::snprintf(buf, sizeof buf, "<0x%02X>", static_cast<unsigned>(b));
      out += buf;
      ++i;
      continue;
    }
    const std::string ch = prompt.substr(i, n);
    if (std::find(unknown.begin(), unknown.end(), ch) == unknown.end()) {
      out += ch;
    } else {
      std::snprintf(buf, sizeof buf, "<U+%04X>", static_cast<unsigned>(cp));
      out += buf;
    }
    i += n;
  }
  return out;
}

// The context without its leading line-start id.
std::vector<int32_t> prompt_ids(const tokenizer::Tokenizer& tok, const std::vector<int32_t>& context) {
  return {context.begin() + (context.front() == tok.eos_id() ? 1 : 0), context.end()};
}

// Times generation with the cache and by full recompute (same options and seed; the texts must match).
// The two paths alternate, run by run, so a noisy machine slows both alike; medians are reported.
void bench(model::GptImpl& model, const std::vector<int32_t>& context, sample::GenerateOptions gen, int repeats) {
  gen.stop_id = -1;
  gen.stop_when = nullptr;
  std::vector<double> ms[2];
  std::vector<int32_t> ids[2];
  for (int r = 0; r < repeats; ++r) {
    for (int cached = 0; cached < 2; ++cached) {
      gen.use_cache = cached == 1;
      auto t0 = std::chrono::steady_clock::now();
      ids[cached] = sample::generate(model, context, gen).front().ids;
      ms[cached].push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
                           static_cast<double>(ids[cached].size()));
    }
  }
  // In fp32 the two paths must agree token for token. bf16 products round a single row and a whole window
  // differently, so there the texts may part: where is said, not refused.
  size_t same = 0;
  while (same < ids[0].size() && same < ids[1].size() && ids[0][same] == ids[1][same]) ++same;
  const bool bf16 = model.ops()->dtype() == torch::kBFloat16;
  if (ids[0] != ids[1] && !bf16) throw Error(ExitCode::kInternal, "[sample] bench: the cached and recomputed texts differ");
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double full = median(ms[0]), cached = median(ms[1]);
  std::printf("prompt %zu tokens (line start included), %zu new tokens, median of %d alternating runs per path\n",
              context.size(), ids[1].size(), repeats);
  std::printf("kv cache:       %8.3f ms/token\nfull recompute: %8.3f ms/token\nspeed-up:       %8.1fx\n", cached, full,
              full / cached);
  if (ids[0] == ids[1]) {
    std::printf("(both paths generated the same %zu tokens)\n", ids[1].size());
  } else {
    std::printf("(bf16: the paths generated the same first %zu tokens, then parted: a single row and a whole window "
                "round differently)\n", same);
  }
}

struct SampleOpts {
  std::string checkpoint, prompt, device = "cpu", precision = "auto";
  std::vector<std::string> stops;
  int rows = 10, threads = 1, bench_repeats = 0;
  int64_t samples = 1;
  bool stop_eos = false, no_truncate = false, no_cache = false, show_ids = false;
  sample::GenerateOptions gen;
};

// Every option combination is checked before anything is printed.
void check_sample_options(const SampleOpts& o, const checkpoint::LoadedCheckpoint& ck) {
  if (o.gen.max_new_tokens == 0 && o.bench_repeats == 0 &&
      (o.samples != 1 || !o.stops.empty() || o.stop_eos || o.no_cache || o.gen.extend_positions)) {
    throw ConfigError("[sample] -n, --stop, --stop-at-eos, --no-cache and --extend-positions shape generated text: "
                      "expected --generate N with N >= 1 as well");
  }
  for (auto& s : o.stops) {
    if (s.empty()) throw ConfigError("[sample] --stop: expected a non-empty string, got ''");
  }
  if (o.rows < 1 || o.rows > ck.arch.vocab_size) {
    throw ConfigError("[sample] --rows: expected 1.." + std::to_string(ck.arch.vocab_size) + ", got " + std::to_string(o.rows));
  }
  if (o.bench_repeats > 0 && o.gen.max_new_tokens < 1) throw ConfigError("[sample] --bench: expected --generate N with N >= 1");
  sample::check_options(*ck.model, o.gen, o.samples);
}

void print_next_token_table(const SampleOpts& o, checkpoint::LoadedCheckpoint& ck, const tokenizer::Tokenizer& tok,
                            const std::vector<int32_t>& context, int64_t dropped) {
  auto probs = sample::next_token_probs(*ck.model, context);
  std::cout << "checkpoint " << ck.dir.string() << " (step " << ck.state.step << ")\n";
  std::cout << "next-token distribution after \"" << (dropped > 0 ? "..." + render(tok, prompt_ids(tok, context)) : o.prompt)
            << "\" (" << context.size() << " context tokens" << (dropped > 0 ? ", " + std::to_string(dropped) + " dropped" : "")
            << ")\n";
  std::printf("%5s  %s %7s  %9s\n", "rank", util::pad("piece", 20).c_str(), "id", "prob");
  for (const auto& row : sample::top_k(probs, o.rows, tok)) {
    std::printf("%5d  %s %7d  %9.6f\n", row.rank, util::pad(row.piece, 20).c_str(), row.id, row.prob);
  }
}

void print_samples(SampleOpts& o, model::GptImpl& model, const tokenizer::Tokenizer& tok, const std::vector<int32_t>& context) {
  if (o.stop_eos) o.gen.stop_id = tok.eos_id();
  const std::vector<int32_t> prompt = prompt_ids(tok, context);
  const size_t prompt_chars = render(tok, prompt).size();
  // where the first stop string starts in prompt+sample text, looking only at what was generated (a stop
  // string may begin inside the prompt and end in the sample)
  auto first_stop = [&](const std::string& text) {
    size_t at = std::string::npos;
    for (auto& stop : o.stops) {
      const size_t from = prompt_chars >= stop.size() ? prompt_chars - stop.size() + 1 : 0;
      at = std::min(at, text.find(stop, std::min(from, text.size())));
    }
    return at;
  };
  if (!o.stops.empty()) {
    o.gen.stop_when = [&](const std::vector<int32_t>& ids) {
      std::vector<int32_t> all = prompt;
      all.insert(all.end(), ids.begin(), ids.end());
      return first_stop(render(tok, all)) != std::string::npos;
    };
  }
  auto samples = sample::generate(model, context, o.gen, o.samples);
  for (size_t i = 0; i < samples.size(); ++i) {
    const auto& s = samples[i];
    // decode prompt and sample together (a piece's word-start space survives); the end-of-text token
    // that stopped a sample is not printed, nor is a stop string
    std::vector<int32_t> all = prompt;
    all.insert(all.end(), s.ids.begin(), s.ids.end() - (s.stop == sample::StopReason::kEndOfText ? 1 : 0));
    std::string text = render(tok, all);
    if (s.stop == sample::StopReason::kStopString) text = text.substr(0, std::max(first_stop(text), prompt_chars));
    // The prompt as written (its unknown characters as code points) when the decoded text starts with it whole.
    const std::string decoded_prompt = render(tok, prompt);
    if (prompt.size() + 1 == context.size() && text.compare(0, decoded_prompt.size(), decoded_prompt) == 0) {
      text = shown_prompt(tok, o.prompt) + text.substr(decoded_prompt.size());
    }
    std::cout << "\nsample " << i + 1 << " of " << samples.size() << ": " << s.ids.size() << " tokens, stopped by "
              << sample::to_string(s.stop) << " (temperature " << o.gen.temperature << ", top-k " << o.gen.top_k
              << ", top-p " << o.gen.top_p << ", seed " << o.gen.seed + i
              << (s.window_slides ? ", window slid " + std::to_string(s.window_slides) + "x" : "") << "):\n";
    std::cout << text << "\n";
    if (o.show_ids) {
      std::cout << "ids:";
      for (int32_t id : s.ids) std::cout << " " << id;
      std::cout << "\n";
    }
  }
  std::fflush(stdout);
}

void run_sample(SampleOpts& o) {
  util::set_compute_threads(o.threads, o.threads);
  auto ck = checkpoint::load_checkpoint(o.checkpoint, reading_ops(o.precision, o.device));
  if (!move_to_device(*ck.model, o.device)) model::pack_parameters_in_huge_pages(*ck.model);
  tokenizer::Tokenizer tok(ck.tokenizer_model);
  if (const auto ft = config::checkpoint_finetune(ck.config_yaml);
      ft.objective == train::Objective::kContrastive && ft.lm_weight == 0) {
    spdlog::warn("{} is a sentence encoder (finetune.objective contrastive, lm_weight 0): it was not trained to "
                 "predict tokens, so its probabilities and samples are not a language model's", ck.dir.string());
  }
  warn_unknown_characters(tok, o.prompt, "prompt");
  int64_t dropped = 0;
  const auto context = sample::fit_prompt(sample::prompt_context(tok, o.prompt), ck.arch.max_seq_len, o.no_truncate, dropped);
  if (dropped > 0) {
    spdlog::warn("prompt is {} tokens; kept its last {} (max_seq_len). --no-truncate makes this an error",
                 dropped + static_cast<int64_t>(context.size()), context.size());
  }
  o.gen.use_cache = !o.no_cache;
  check_sample_options(o, ck);
  if (o.bench_repeats > 0) return bench(*ck.model, context, o.gen, o.bench_repeats);
  print_next_token_table(o, ck, tok, context, dropped);
  if (o.gen.max_new_tokens > 0) print_samples(o, *ck.model, tok, context);
}

}  // namespace

void warn_unknown_characters(const tokenizer::Tokenizer& tok, const std::string& text, const std::string& what) {
  const auto unknown = tok.unknown_characters(text);
  if (unknown.empty()) return;
  std::vector<std::string> distinct;
  for (const auto& c : unknown) {
    if (std::find(distinct.begin(), distinct.end(), c) == distinct.end()) distinct.push_back(c);
  }
  spdlog::warn("{}: {} character{} the tokenizer does not know ({}) {} the unknown piece <unk> (id {})", what,
               unknown.size(), unknown.size() == 1 ? "" : "s", util::join(distinct, " "),
               unknown.size() == 1 ? "becomes" : "become", tok.unk_id());
}

model::OpsPtr reading_ops(const std::string& precision, const std::string& device_spec) {
  const torch::Device device = util::resolve_device(util::parse_device(device_spec));
  const util::PrecisionChoice p = util::choose_precision(util::parse_precision(precision), device);
  // Said when chosen or other than fp32 (an explicit fp32, inspect's default, changes nothing to say; and
  // `inspect probs --json` readers take the output whole).
  const auto level = precision == "fp32" ? spdlog::level::debug : spdlog::level::info;
  spdlog::log(level, "precision {} ({})", util::precision_name(p.dtype), precision == "auto" ? p.why : "--precision " + precision);
  return model::reading_ops(p.dtype);
}

bool move_to_device(model::GptImpl& model, const std::string& spec) {
  const torch::Device device = util::resolve_device(util::parse_device(spec));
  if (device.is_cpu()) return false;
  model.to(device);
  spdlog::info("device {}", util::describe_device(device));
  return true;
}

void add_sample_commands(CLI::App& app) {
  auto o = std::make_shared<SampleOpts>();
  o->gen.max_new_tokens = 0;
  auto* cmd = app.add_subcommand("sample", "Next-token probabilities after a prompt, and generated text");
  cmd->add_option("--checkpoint", o->checkpoint, "checkpoint directory, or a run directory (uses its `latest`)")->required();
  cmd->add_option("--prompt", o->prompt, "text to condition on (a line start is implied)")->capture_default_str();
  cmd->add_option("--rows", o->rows, "rows of the next-token table")->capture_default_str();
  cmd->add_option("--top-k", o->gen.top_k, "sample from the k most likely tokens only (0 = all)")->capture_default_str();
  cmd->add_option("--top-p", o->gen.top_p, "sample from the smallest most-likely set whose probability reaches p")
      ->capture_default_str();
  cmd->add_option("--generate", o->gen.max_new_tokens, "tokens to generate after the prompt (0 = table only)")
      ->capture_default_str();
  cmd->add_option("--temperature", o->gen.temperature, "sampling temperature; 0 = greedy")->capture_default_str();
  cmd->add_option("--seed", o->gen.seed, "sampling seed; sample i uses seed+i (same seed and precision, same text)")
      ->capture_default_str()
      ->check(kSeedValidator);
  cmd->add_option("-n,--num-samples", o->samples, "samples to draw from the prompt")->capture_default_str();
  cmd->add_flag("--stop-at-eos", o->stop_eos, "end a sample at the end-of-text (end-of-line) token");
  cmd->add_option("--stop", o->stops, "end a sample once its text contains this string (repeatable; not printed)");
  cmd->add_flag("--no-truncate", o->no_truncate, "a prompt longer than max_seq_len is an error (default: keep its end)");
  cmd->add_flag("--extend-positions", o->gen.extend_positions,
                "sinusoidal and rope models: run positions past max_seq_len instead of sliding the window");
  cmd->add_flag("--show-ids", o->show_ids, "after each sample, print the ids it generated (the stopping </s> included)");
  cmd->add_flag("--no-cache", o->no_cache, "recompute the whole window for every token (slow; for comparison)");
  cmd->add_option("--bench", o->bench_repeats, "time --generate tokens with the cache and by full recompute, N runs each")
      ->check(CLI::Range(1, 1 << 30));
  add_device_option(cmd, o->device);
  add_precision_option(cmd, o->precision);
  cmd->add_option("--threads", o->threads, "compute threads")->capture_default_str()->check(CLI::Range(1, 1 << 30));
  cmd->callback([o] { run_sample(*o); });
}

}  // namespace lm::cli
