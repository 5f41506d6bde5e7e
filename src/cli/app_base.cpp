#include "cli/app_base.h"

#include <iostream>
#include <string>

#include "lmtrain_commit.h"  // generated at build time: LMTRAIN_COMMIT
#include "util/errors.h"
#include "util/logging.h"

namespace lm::cli {

void describe_app(CLI::App& app, bool& verbose) {
  app.description("lmtrain: train, fine-tune, sample and inspect small decoder-only language models.\n"
                  "Exit codes: 0 ok, 1 internal, 2 usage/config, 3 data/tokenizer, 4 checkpoint, 5 non-finite loss,\n"
                  "6 save failure, 7 distributed, 130 SIGINT, 143 SIGTERM.");
  app.require_subcommand(1);
  app.set_version_flag("--version", "lmtrain " LMTRAIN_VERSION "\nLibTorch " LMTRAIN_TORCH_VERSION "\ncommit " LMTRAIN_COMMIT);
  app.add_flag("-v,--verbose", verbose, "debug logging");
  app.parse_complete_callback([&verbose] { util::setup_logging(verbose); });
}

int parse_and_run(CLI::App& app, int argc, char** argv) {
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
