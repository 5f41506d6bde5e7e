// `lmtrain ckpt verify|info DIR`: re-hash a checkpoint against its manifest; print what it holds.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "checkpoint/checkpoint.h"
#include "checkpoint/state_text.h"
#include "cli/commands.h"
#include "util/fs.h"

namespace lm::cli {
namespace fs = std::filesystem;

void add_checkpoint_commands(CLI::App& app) {
  auto* ckpt = app.add_subcommand("ckpt", "Verify or describe a checkpoint");
  ckpt->require_subcommand(1);
  auto dir = std::make_shared<std::string>();
  auto* verify = ckpt->add_subcommand("verify", "Re-hash every file against manifest.json (exit 4 on any mismatch)");
  verify->add_option("dir", *dir, "checkpoint directory, or a run directory (its `latest`)")->required();
  verify->callback([dir] {
    fs::path d = checkpoint::resolve_checkpoint(*dir);
    checkpoint::verify_checkpoint(d);
    auto m = nlohmann::json::parse(util::read_file(d / "manifest.json"));
    std::cout << "ok: " << d.string() << ": " << m.at("files").size() << " files match manifest.json\n";
  });
  auto* info = ckpt->add_subcommand("info", "Architecture, step, tokens seen, validation loss and file sizes");
  info->add_option("dir", *dir, "checkpoint directory, or a run directory (its `latest`)")->required();
  info->callback([dir] {
    fs::path d = checkpoint::resolve_checkpoint(*dir);
    auto arch = checkpoint::read_arch(d);
    auto st = checkpoint::read_trainer_state(d);
    auto m = nlohmann::json::parse(util::read_file(d / "manifest.json"));
    std::printf("%-26s %s\n%-26s %s\n", "checkpoint", d.string().c_str(), "arch", model::describe(arch).c_str());
    for (const auto& [key, value] : checkpoint::describe_state(st)) std::printf("%-26s %s\n", key.c_str(), value.c_str());
    std::printf("files\n");
    uint64_t total = 0;
    for (const auto& f : m.at("files")) {
      const auto bytes = f.at("bytes").get<uint64_t>();
      total += bytes;
      std::printf("  %-20s %12llu bytes  sha256 %s\n", f.at("name").get<std::string>().c_str(),
                  static_cast<unsigned long long>(bytes), f.at("sha256").get<std::string>().substr(0, 16).c_str());
    }
    std::printf("  %-20s %12llu bytes\n", "total", static_cast<unsigned long long>(total));
  });
}

}  // namespace lm::cli
