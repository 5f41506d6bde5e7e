// `lmtrain plot RUN_DIR`: loss and learning-rate curves from RUN/metrics.jsonl to a PNG.
#include <iostream>

#include "cli/commands.h"
#include "inspect/plot.h"

namespace lm::cli {

void add_plot_commands(CLI::App& app) {
  struct Opts {
    std::string run_dir, output;
  };
  auto o = std::make_shared<Opts>();
  auto* plot = app.add_subcommand("plot", "Draw train/validation loss and lr curves of a run to a PNG (gnuplot)");
  plot->add_option("run_dir", o->run_dir, "run directory (reads metrics.jsonl)")->required();
  plot->add_option("-o,--output", o->output, "PNG to write (default: RUN_DIR/loss.png)");
  plot->callback([o] { std::cout << "wrote " << inspect::plot_run(o->run_dir, o->output).string() << "\n"; });
}

}  // namespace lm::cli
