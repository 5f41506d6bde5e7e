// The matrix's checkpoint cases (tests/matrix.h): truncation, flipped bits, hostile manifests, things that
// are not checkpoints, another architecture, broken `latest`, and resume's choice between them.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "matrix.h"
#include "matrix_expect.h"

namespace lm::test::matrix {

namespace {

// `sample` of a copy of step 4 changed by `edit`; the shared run stays intact and the damaged copy is not
// "repaired" or deleted by a reading command.
Case damaged(std::string name, std::string input, std::string pattern, std::function<void(const fs::path&)> edit,
             std::string command = "sample --prompt the --checkpoint") {
  Case c{name, input, pattern, 4, "the damaged copy is left as it was (a reader never rewrites a checkpoint)",
         nullptr, nullptr};
  c.act = [edit, command](Ctx& ctx) {
    const fs::path ck = ctx.copy_checkpoint(4, "ck");
    edit(ck);
    ctx.copy_checkpoint(4, "expected");
    edit(ctx / "expected");
    return ctx.lm(command + " " + ck.string());
  };
  c.check = [](Ctx& ctx, const RunResult&) {
    for (const auto& e : fs::directory_iterator(ctx / "expected")) {
      EXPECT_EQ(slurp(ctx / "ck" / e.path().filename()), slurp(e.path())) << e.path().filename();
    }
  };
  return c;
}

void edit_manifest(const fs::path& ck, const std::string& from, const std::string& to) {
  std::string m = slurp(ck / "manifest.json");
  const auto at = m.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  m.replace(at, from.size(), to);
  std::ofstream(ck / "manifest.json", std::ios::trunc) << m;
}

// A run copy whose `latest` is changed by `edit`, read by `sample --checkpoint RUN`.
Case latest_case(std::string name, std::string input, const char* pattern, std::function<void(const fs::path&)> edit,
                int code = 4) {
  Case c{name, input, pattern, code, "every checkpoint of the run still verifies", nullptr, nullptr};
  c.act = [edit](Ctx& ctx) {
    const fs::path run = ctx.copy_run();
    edit(run);
    return ctx.lm("sample --prompt the --checkpoint " + run.string());
  };
  c.check = [](Ctx& ctx, const RunResult&) {
    for (const auto& ck : {"step_00000002", "step_00000004"}) {
      if (fs::exists(ctx / "run" / ck / "manifest.json")) {
        EXPECT_EQ(ctx.lm("ckpt verify " + (ctx / "run" / ck).string()).exit_code, 0);
      }
    }
  };
  return c;
}

}  // namespace

std::vector<Case> checkpoint_cases() {
  // (Case lists are built when tests are listed, so sizes are read inside the actions, not here.)
  auto weights = [](const fs::path& ck) { return fs::file_size(ck / "model.safetensors"); };
  std::vector<Case> out = {
      damaged("ckpt_weights_empty", "model.safetensors truncated to 0 bytes", subst(expect::kCkptSize, "%SIZE%", "0"),
              [](const fs::path& ck) { truncate_to(ck / "model.safetensors", 0); }),
      damaged("ckpt_weights_half", "model.safetensors truncated to half", subst(expect::kCkptSize, "%SIZE%", R"(\d+)"),
              [=](const fs::path& ck) { truncate_to(ck / "model.safetensors", weights(ck) / 2); }),
      damaged("ckpt_weights_minus_one", "model.safetensors truncated to size-1", subst(expect::kCkptSize, "%SIZE%", R"(\d+)"),
              [=](const fs::path& ck) { truncate_to(ck / "model.safetensors", weights(ck) - 1); }),
  };
  for (const std::string file : {"model.safetensors", "optimizer.pt", "trainer_state.json", "config.yaml", "arch.json",
                                 "tokenizer.model"}) {
    std::string id = file.substr(0, file.find('.'));
    out.push_back(damaged("ckpt_bitflip_" + id, "one flipped bit in the middle of " + file,
                          subst(expect::kCkptHash, "%FILE%", file), [file](const fs::path& ck) {
                            flip_bit(ck / file, fs::file_size(ck / file) / 2, 3);
                          }));
  }
  out.push_back(damaged("ckpt_bitflip_manifest", "one flipped bit in manifest.json (inside the first SHA-256)",
                        expect::kCkptManifestFlip, [](const fs::path& ck) {
                          const std::string m = slurp(ck / "manifest.json");
                          flip_bit(ck / "manifest.json", m.find("\"sha256\": \"") + 14, 0);
                        }, "ckpt verify"));
  out.push_back(damaged("manifest_parent_path", "manifest naming ../model.safetensors",
                        subst(expect::kCkptOutsidePath, "%NAME%", R"(\.\./model\.safetensors)"),
                        [](const fs::path& ck) {
                          edit_manifest(ck, "\"name\": \"model.safetensors\"", "\"name\": \"../model.safetensors\"");
                        }));
  out.push_back(damaged("manifest_absolute_path", "manifest naming /etc/passwd", subst(expect::kCkptOutsidePath, "%NAME%", "/etc/passwd"),
                        [](const fs::path& ck) { edit_manifest(ck, "\"name\": \"config.yaml\"", "\"name\": \"/etc/passwd\""); }));
  out.push_back(damaged("manifest_size_disagrees", "manifest size of model.safetensors one more than the file",
                        subst(expect::kCkptSize, "%SIZE%", R"(\d+)"), [=](const fs::path& ck) {
                          const auto n = weights(ck);
                          edit_manifest(ck, "\"bytes\": " + std::to_string(n), "\"bytes\": " + std::to_string(n + 1));
                        }));
  out.push_back(damaged("manifest_drops_a_file", "manifest without its arch.json entry (an unverified file)",
                        expect::kCkptUnlisted, [](const fs::path& ck) {
                          auto m = nlohmann::json::parse(slurp(ck / "manifest.json"));
                          auto& files = m["files"];
                          for (size_t i = 0; i < files.size(); ++i) {
                            if (files[i]["name"] == "arch.json") files.erase(i);
                          }
                          std::ofstream(ck / "manifest.json", std::ios::trunc) << m.dump(2) << "\n";
                        }));
  Case html{"ckpt_is_html", "an HTML page passed as --checkpoint", expect::kCkptNotADir, 4, "the file is unchanged",
            nullptr, nullptr};
  html.act = [](Ctx& ctx) {
    return ctx.lm("sample --prompt the --checkpoint " + ctx.write("page.html", "<html><body>404</body></html>\n").string());
  };
  html.check = [](Ctx& ctx, const RunResult&) { EXPECT_EQ(slurp(ctx / "page.html"), "<html><body>404</body></html>\n"); };
  out.push_back(html);
  Case spm = html;
  spm.name = "ckpt_is_tokenizer_model";
  spm.input = "a SentencePiece tokenizer.model passed as --checkpoint";
  spm.intact = "the model file is unchanged";
  spm.act = [](Ctx& ctx) {
    fs::copy_file(Ctx::base_run() / "tokenizer.model", ctx / "tokenizer.model");
    return ctx.lm("sample --prompt the --checkpoint " + (ctx / "tokenizer.model").string());
  };
  spm.check = [](Ctx& ctx, const RunResult&) {
    EXPECT_EQ(slurp(ctx / "tokenizer.model"), slurp(Ctx::base_run() / "tokenizer.model"));
  };
  out.push_back(spm);
  Case shut{"ckpt_dir_shut", "a run directory its user may not read (mode 0300; root's override dropped) as --checkpoint",
            expect::kCkptShut, 4, "the run is unchanged", nullptr, nullptr};
  shut.act = [](Ctx& ctx) {
    const fs::path run = ctx.copy_run();
    fs::permissions(run, fs::perms::owner_write | fs::perms::owner_exec);
    return run_command(as_unprivileged() + LMTRAIN_BINARY + " sample --prompt the --checkpoint " + run.string());
  };
  shut.check = [](Ctx& ctx, const RunResult&) {
    fs::permissions(ctx / "run", fs::perms::owner_all);
    EXPECT_EQ(slurp(ctx / "run" / "latest"), slurp(Ctx::base_run() / "latest"));
  };
  out.push_back(shut);
  Case arch{"ckpt_other_architecture", "`train --resume PATH` of a d_model 32 checkpoint with a d_model 48 config",
            expect::kCkptOtherArch, 4, "no step of training runs; the checkpoint still verifies", nullptr, nullptr};
  arch.act = [](Ctx& ctx) {
    return ctx.lm("train -c " + ctx.config("run", "d_model: 48, n_layers: 2, n_heads: 2, max_seq_len: 16").string() +
                  " --resume " + (Ctx::base_run() / "step_00000004").string());
  };
  arch.check = [](Ctx& ctx, const RunResult&) {
    EXPECT_FALSE(fs::exists(ctx / "run" / "metrics.jsonl"));
    EXPECT_EQ(ctx.lm("ckpt verify " + (Ctx::base_run() / "step_00000004").string()).exit_code, 0);
  };
  out.push_back(arch);
  out.push_back(latest_case("latest_missing", "run directory without `latest`", expect::kLatestMissing,
                            [](const fs::path& run) { fs::remove(run / "latest"); }));
  out.push_back(latest_case("latest_deleted_target", "`latest` naming a deleted checkpoint (reads the newest left)",
                            expect::kLatestDeleted, [](const fs::path& run) { fs::remove_all(run / "step_00000004"); }, 0));
  out.push_back(latest_case("latest_target_without_manifest", "`latest` naming a checkpoint whose manifest.json is gone",
                            expect::kLatestNoManifest, [](const fs::path& run) { fs::remove(run / "step_00000004" / "manifest.json"); },
                            0));
  out.push_back(latest_case("latest_nothing_left", "`latest` naming a deleted checkpoint, and no other checkpoint",
                            expect::kLatestNothingLeft, [](const fs::path& run) {
                              fs::remove_all(run / "step_00000004");
                              fs::remove_all(run / "step_00000002");
                            }));
  out.push_back(latest_case("latest_outside_run", "`latest` naming ../elsewhere", expect::kLatestOutside,
                            [](const fs::path& run) { std::ofstream(run / "latest", std::ios::trunc) << "../elsewhere\n"; }));
  Case fallback{"resume_auto_newest_corrupt", "`--resume auto` when the newest checkpoint has a flipped bit",
                expect::kResumeAutoFallback, 0,
                "it resumes from step 2 and ends with the same weights as an uninterrupted run", nullptr, nullptr};
  fallback.act = [](Ctx& ctx) {
    const fs::path run = ctx.copy_run();
    flip_bit(run / "step_00000004" / "model.safetensors", 200, 1);
    return ctx.lm("train -c " + ctx.config().string() + " --resume auto");
  };
  fallback.check = [](Ctx& ctx, const RunResult& r) {
    EXPECT_NE(r.output.find("resumed from"), std::string::npos) << r.output;
    EXPECT_EQ(manifest_sha(ctx / "run" / "step_00000004", "model.safetensors"), Ctx::base_final_sha());
  };
  out.push_back(fallback);
  Case explicit_path{"resume_explicit_corrupt", "`--resume PATH` naming a checkpoint with a flipped bit",
                     expect::kResumeExplicitCorrupt, 4, "no step runs: metrics.jsonl and step_00000002 are unchanged",
                     nullptr, nullptr};
  explicit_path.act = [](Ctx& ctx) {
    const fs::path run = ctx.copy_run();
    flip_bit(run / "step_00000004" / "model.safetensors", 200, 1);
    return ctx.lm("train -c " + ctx.config().string() + " --resume " + (run / "step_00000004").string());
  };
  explicit_path.check = [](Ctx& ctx, const RunResult&) {
    EXPECT_EQ(slurp(ctx / "run" / "metrics.jsonl"), slurp(Ctx::base_run() / "metrics.jsonl"));
    EXPECT_EQ(ctx.lm("ckpt verify " + (ctx / "run" / "step_00000002").string()).exit_code, 0);
  };
  out.push_back(explicit_path);
  return out;
}

}  // namespace lm::test::matrix
