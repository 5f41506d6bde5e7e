#include "cli/front.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>

#include "cli/app_base.h"
#include "util/blas_kernels.h"
#include "util/errors.h"
#include "util/memory.h"

namespace lm::cli {

bool runs_in_front(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-v" || arg == "--verbose") continue;
    return arg == "prepare" || arg == "corpus";
  }
  return false;
}

int run_front(int argc, char** argv) {
  if (runs_in_front(argc, argv)) {
    util::keep_freed_memory();
    CLI::App app;
    bool verbose = false;
    describe_app(app, verbose);
    add_data_commands(app);
    add_corpus_commands(app);
    return parse_and_run(app, argc, argv);
  }
  // Beside this executable: /proc/self/exe, else argv[0] when it names a path; never the working directory.
  std::error_code ec;
  std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec && argc > 0 && std::string(argv[0]).find('/') != std::string::npos) self = argv[0];
  if (self.empty()) {
    std::cerr << std::string("error: [internal] cannot find this executable's directory to start ") + kFullExecutable +
                     ". Hint: run lmtrain by its path (e.g. build/lmtrain).\n";
    return static_cast<int>(ExitCode::kInternal);
  }
  // Beside it in a build tree; PREFIX/lib/lmtrain/ when installed (cmake --install, the .deb).
  std::filesystem::path full_path = self.parent_path() / kFullExecutable;
  const auto installed = self.parent_path().parent_path() / "lib" / "lmtrain" / kFullExecutable;
  if (!std::filesystem::exists(full_path, ec) && std::filesystem::exists(installed, ec)) full_path = installed;
  const std::string full = full_path.string();
  util::choose_blas_kernels_before_loading();  // OPENBLAS_CORETYPE for the full executable (util/blas_kernels.h)
  execv(full.c_str(), argv);  // returns only on failure
  std::cerr << "error: [internal] cannot start " + full + ": " + std::strerror(errno) +
                   ". Hint: it is built beside lmtrain (cmake --build build --target lmtrain) and installed in PREFIX/lib/lmtrain.\n";
  return static_cast<int>(ExitCode::kInternal);
}

}  // namespace lm::cli
