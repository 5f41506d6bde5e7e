#include "data/corpus.h"

#include <sys/wait.h>

#include <cstdio>
#include <regex>
#include <sstream>

#include "data/paragraphs.h"
#include "util/errors.h"
#include "util/fs.h"

namespace lm::data {

namespace {

// Standard output of a shell command line (its arguments quoted by the caller); throws DataError when it
// cannot start or exits non-zero.
std::string run(const std::string& command, const std::string& what) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) throw DataError("[corpus] cannot run " + what);
  std::string out;
  char buf[1 << 16];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int status = pclose(pipe);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw DataError("[corpus] " + what + " failed (exit status " +
                    std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")");
  }
  return out;
}

std::string quoted(const std::string& s) {
  std::string q = "'";
  for (const char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

bool installed(const std::string& package) {
  FILE* pipe = popen(("dpkg-query -W -f='${Status}' " + quoted(package) + " 2>/dev/null").c_str(), "r");
  if (pipe == nullptr) return false;
  char buf[256];
  const size_t n = fread(buf, 1, sizeof buf, pipe);
  pclose(pipe);
  return std::string(buf, n).find("install ok installed") != std::string::npos;
}

// The Bible, one verse per line: "Ge1:1 In the beginning ..." -> "In the beginning ...", blank lines dropped.
std::string kjv_text() {
  const std::string raw = run("bible -f gen1:1-rev22:21", "bible -f gen1:1-rev22:21 (package bible-kjv)");
  static const std::regex reference("^[0-9]?[A-Za-z]+[0-9]+:[0-9]+ ");
  std::string out;
  std::istringstream in(raw);
  for (std::string line; std::getline(in, line);) {
    line = std::regex_replace(line, reference, "", std::regex_constants::format_first_only);
    if (line.find_first_not_of(" \t\r\v\f") == std::string::npos) continue;
    out += line + "\n";
  }
  return out;
}

std::string faq_text(const std::string& name, std::string& log) {
  std::filesystem::path txt = "/usr/share/doc/debian/FAQ/debian-faq.ko.txt.gz";
  if (name == "debian-faq") {
    txt = "/usr/share/doc/debian/FAQ/debian-faq.en.txt.gz";
    if (!std::filesystem::exists(txt)) txt = "/usr/share/doc/debian/FAQ/debian-faq.txt.gz";
  }
  if (!std::filesystem::exists(txt)) {
    throw DataError("[corpus] " + txt.string() + " is missing although " + name + " is installed. Hint: reinstall it: apt-get install --reinstall " + name);
  }
  JoinCounts counts;
  std::string text = join_paragraphs(run("zcat -- " + quoted(txt.string()), "zcat " + txt.string()), &counts);
  log = std::to_string(counts.paragraphs) + " paragraphs (" + std::to_string(counts.wraps) + " wrapped lines joined, " +
        std::to_string(counts.without_space) + " of them inside a word), ";
  return text;
}

}  // namespace

std::vector<std::string> corpus_names() { return {"kjv", "debian-faq", "debian-faq-ko"}; }

std::string corpus_package(const std::string& name) {
  if (name == "kjv") return "bible-kjv";
  if (name == "debian-faq" || name == "debian-faq-ko") return name;
  return "";
}

std::string fetch_corpus(const std::string& name, const std::filesystem::path& out_dir) {
  const std::string package = corpus_package(name);
  if (package.empty()) throw ConfigError("[corpus] unknown corpus '" + name + "'. Hint: one of kjv, debian-faq, debian-faq-ko");
  if (!installed(package)) {
    throw DataError("[corpus] " + name + " comes from the Debian package " + package +
                    ", which is not installed. Hint: apt-get install " + package + " (as root), then run this again");
  }
  std::string log;
  const std::string text = name == "kjv" ? kjv_text() : faq_text(name, log);
  std::vector<size_t> starts;  // where each line starts
  for (size_t i = 0; i < text.size();) {
    starts.push_back(i);
    const size_t nl = text.find('\n', i);
    if (nl == std::string::npos) break;
    i = nl + 1;
  }
  const size_t total = starts.size(), val = total / 10, cut = total - val;
  const size_t at = cut < total ? starts[cut] : text.size();
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) throw SaveError("[corpus] cannot create " + out_dir.string() + ": " + ec.message());
  util::atomic_write_file(out_dir / "train.txt", std::string_view(text).substr(0, at));
  util::atomic_write_file(out_dir / "val.txt", std::string_view(text).substr(at));
  return "corpus " + name + ": " + log + std::to_string(cut) + " train lines, " + std::to_string(val) + " val lines in " +
         out_dir.string();
}

}  // namespace lm::data
