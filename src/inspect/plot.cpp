#include "inspect/plot.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "util/errors.h"
#include "util/fs.h"

namespace lm::inspect {
namespace fs = std::filesystem;

namespace {

// Quotes a path for a gnuplot string literal.
std::string gp_quoted(const fs::path& p) {
  std::string out = "'";
  for (char c : p.string()) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

int run_gnuplot(const fs::path& script) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::execlp("gnuplot", "gnuplot", script.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

std::string plot_script(const fs::path& dir, const fs::path& png, const std::string& title, bool has_val, bool has_full,
                        int64_t max_step, const std::string& loss_unit) {
  std::ostringstream gp;
  // noenhanced: "eval_batches" and a run named my_run print as typed, not with subscripts
  gp << "set terminal pngcairo noenhanced size 1000,700 font 'Sans,10'\n"
     << "set output " << gp_quoted(png) << "\n"
     << "set multiplot layout 2,1 title " << gp_quoted(title) << "\n"
     << "set grid\nset xlabel 'step'\nset xrange [0:" << max_step << "]\n"  // both panels share the x axis
     << "set ylabel " << gp_quoted("loss (" + loss_unit + ")") << "\nset key top right\n"
     << "plot " << gp_quoted(dir / "train.dat") << " using 1:2 with lines lw 2 title 'train'";
  if (has_val) gp << ", " << gp_quoted(dir / "val.dat") << " using 1:2 with linespoints pt 7 lw 2 title 'validation (eval_batches)'";
  if (has_full) gp << ", " << gp_quoted(dir / "full.dat") << " using 1:2 with points pt 5 ps 1.5 title 'validation (whole val file)'";
  gp << "\nset ylabel 'learning rate'\nset format y '%.1e'\n"
     << "plot " << gp_quoted(dir / "train.dat") << " using 1:3 with lines lw 2 lc rgb '#808080' title 'lr'\n"
     << "unset multiplot\n";
  return gp.str();
}

fs::path plot_run(const fs::path& run_dir, fs::path png) {
  const fs::path metrics = run_dir / "metrics.jsonl";
  if (!fs::is_regular_file(metrics)) {
    throw DataError("[plot] no metrics: expected " + metrics.string() + ". Hint: give a run directory of `lmtrain train`.");
  }
  if (png.empty()) png = run_dir / "loss.png";
  std::ostringstream train, val, full;
  size_t n_train = 0, n_val = 0, n_full = 0;
  int64_t max_step = 1;
  std::string unit = "nats/token";  // the last start/resume record's; files without one are next-token runs
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    try {
      auto j = nlohmann::json::parse(line);
      if ((j.at("kind") == "start" || j.at("kind") == "resume") && j.contains("loss_unit")) {
        unit = j.at("loss_unit").get<std::string>();
      } else if (j.at("kind") == "train") {
        max_step = std::max(max_step, j.at("step").get<int64_t>());
        train << j.at("step").get<int64_t>() << " " << j.at("loss").get<double>() << " " << j.at("lr").get<double>() << "\n";
        ++n_train;
      } else if (j.at("kind") == "val") {
        const bool whole = j.value("full", false);
        max_step = std::max(max_step, j.at("step").get<int64_t>());
        (whole ? full : val) << j.at("step").get<int64_t>() << " " << j.at("loss").get<double>() << "\n";
        ++(whole ? n_full : n_val);
      }
    } catch (const nlohmann::json::exception&) {
      // a torn line from a killed run: skip it
    }
  }
  if (n_train == 0) throw DataError("[plot] " + metrics.string() + " holds no training records");
  const fs::path tmp = run_dir / ("plot." + util::temp_suffix());
  fs::create_directories(tmp);
  struct Cleanup {
    fs::path p;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(p, ec);
    }
  } cleanup{tmp};
  util::write_file_synced(tmp / "train.dat", train.str());
  util::write_file_synced(tmp / "val.dat", val.str());
  util::write_file_synced(tmp / "full.dat", full.str());
  const fs::path out_tmp = tmp / "out.png";
  const std::string title = (run_dir.filename().empty() ? run_dir.parent_path() : run_dir).filename().string();
  std::ostringstream gp;
  gp << plot_script(tmp, out_tmp, title, n_val > 0, n_full > 0, max_step, unit);
  util::write_file_synced(tmp / "plot.gp", gp.str());
  const int rc = run_gnuplot(tmp / "plot.gp");
  if (rc != 0 || !fs::is_regular_file(out_tmp)) {
    throw Error(ExitCode::kInternal, "[plot] gnuplot failed (exit " + std::to_string(rc) +
                                         "). Hint: install gnuplot-nox (scripts/setup.sh does).");
  }
  util::atomic_write_file(png, util::read_file(out_tmp, "plot"));
  return png;
}

}  // namespace lm::inspect
