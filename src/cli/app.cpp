#include "cli/app.h"

#include <spdlog/spdlog.h>

#include <iostream>

#include "cli/commands.h"
#include "cli/jobs.h"
#include "util/errors.h"
#include "util/logging.h"
#include "util/memory.h"

namespace lm::cli {

int run(int argc, char** argv, const util::Faults& faults) {
  util::keep_freed_memory();
  set_command_line(argc, argv);
  CLI::App app{"lmtrain: train, fine-tune, sample and inspect small decoder-only language models.\n"
               "Exit codes: 0 ok, 1 internal, 2 usage/config, 3 data/tokenizer, 4 checkpoint, 5 non-finite loss,\n"
               "6 save failure, 7 distributed, 130 SIGINT, 143 SIGTERM."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "lmtrain 0.1.0");
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "debug logging");
  app.parse_complete_callback([&] { util::setup_logging(verbose); });
  add_tokenizer_commands(app);
  add_data_commands(app);
  add_train_commands(app, faults);
  add_sample_commands(app);
  add_checkpoint_commands(app);
  add_plot_commands(app);
  add_report_commands(app);
  add_inspect_commands(app);
  add_finetune_commands(app, faults);
  add_export_commands(app);
  add_import_commands(app);
  try {
    app.parse(argc, argv);
    return 0;
  } catch (const CLI::Success& e) {
    return app.exit(e);  // --help, --version
  } catch (const CLI::ParseError& e) {
    std::cerr << std::string("error: [cli] ") + e.what() + ". Hint: `lmtrain --help`, `lmtrain <command> --help`.\n";
    return static_cast<int>(ExitCode::kUsage);
  } catch (const Interrupted& e) {
    std::cerr << std::string("interrupted: ") + e.what() + "\n";
    return static_cast<int>(e.code());
  } catch (const Error& e) {
    std::cerr << std::string("error: ") + e.what() + "\n";  // one write: ranks share a pipe
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    // LibTorch's c10::Error appends a C++ backtrace after the message; users get the message only.
    std::string what = e.what();
    if (auto bt = what.find("\nException raised from"); bt != std::string::npos) what.resize(bt);
    std::cerr << "error: [internal] " + what + "\n";
    return static_cast<int>(ExitCode::kInternal);
  }
}

}  // namespace lm::cli
