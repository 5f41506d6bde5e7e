#include "cli/app.h"

#include "cli/app_base.h"
#include "cli/commands.h"
#include "cli/jobs.h"
#include "util/memory.h"

namespace lm::cli {

int run(int argc, char** argv) {
  util::keep_freed_memory();
  set_command_line(argc, argv);
  CLI::App app;
  bool verbose = false;
  describe_app(app, verbose);
  add_tokenizer_commands(app);
  add_data_commands(app);
  add_corpus_commands(app);
  add_train_commands(app);
  add_sample_commands(app);
  add_checkpoint_commands(app);
  add_plot_commands(app);
  add_report_commands(app);
  add_inspect_commands(app);
  add_embed_commands(app);
  add_finetune_commands(app);
  add_export_commands(app);
  add_import_commands(app);
  return parse_and_run(app, argc, argv);
}

}  // namespace lm::cli
