// `lmtrain report RUN_OR_CHECKPOINT`: one self-contained HTML page about a run (report/report.h).
#include <cctype>
#include <iostream>

#include "cli/commands.h"
#include "report/report.h"
#include "util/errors.h"
#include "util/text.h"

namespace lm::cli {
namespace fs = std::filesystem;

namespace {

// A file:// address a browser opens as is: every byte outside [A-Za-z0-9/._~-] percent-encoded.
std::string file_url(const fs::path& p) {
  static const char* hex = "0123456789ABCDEF";
  std::string out = "file://";
  for (unsigned char c : fs::absolute(p).lexically_normal().string()) {
    if (std::isalnum(c) || c == '/' || c == '.' || c == '_' || c == '~' || c == '-') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

}  // namespace

void add_report_commands(CLI::App& app) {
  auto o = std::make_shared<report::ReportOptions>();
  auto target = std::make_shared<std::string>();
  auto compare = std::make_shared<std::string>();
  auto output = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("report",
                                 "Write one self-contained HTML page: run summary, curves, embedding map, positions, "
                                 "fine-tune drift, next-token bars, context (opens offline in any browser)");
  cmd->add_option("target", *target, "run directory (its `latest`) or checkpoint directory")->required();
  cmd->add_option("--compare", *compare, "checkpoint to measure embedding drift from (default: a fine-tune's --from)");
  cmd->add_option("--prompt", o->prompt, "text whose next-token probabilities are drawn, e.g. \"And God said\"");
  cmd->add_option("--context-text", o->context_texts,
                  "a text for the context section (repeat it): one shared piece's cosine by depth and its logit lens");
  cmd->add_option("--context-piece", o->context_piece, "the piece the context section follows (default: the first shared one)");
  cmd->add_option("-o,--output", *output, "HTML file to write (default: RUN/report.html)");
  cmd->add_option("--points", o->points, "most frequent pieces on the embedding map")->capture_default_str()->check(CLI::Range(2, 1 << 20));
  cmd->add_option("--neighbours", o->neighbours, "nearest neighbours listed per piece")->capture_default_str()->check(CLI::Range(1, 1000));
  cmd->add_option("-k,--top-k", o->top_k, "alternatives per position in the next-token bars")->capture_default_str()->check(CLI::Range(1, 100));
  cmd->callback([o, target, compare, output] {
    if (o->context_texts.size() == 1 && o->context_piece.empty()) {
      throw ConfigError("[report] --context-text: expected two or more (or one with a --context-piece that occurs twice in it)");
    }
    if (o->context_texts.empty() && !o->context_piece.empty()) {
      throw ConfigError("[report] --context-piece: expected --context-text as well");
    }
    o->target = *target;
    o->compare = *compare;
    o->output = *output;
    const auto r = report::write_report(*o);
    if (!r.drift_from.empty()) std::cout << "drift measured from " << r.drift_from << "\n";
    std::cout << "wrote " << r.path.string() << " (" << util::mib(static_cast<double>(r.bytes))
              << "); open it in a browser: " << file_url(r.path) << "\n";
  });
}

}  // namespace lm::cli
