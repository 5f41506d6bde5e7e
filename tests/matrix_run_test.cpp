// The matrix's filesystem, process, signal, numeric and sampling cases (tests/matrix.h). Faults are injected
// through lmtrain_faults (util/faults.h); signals are real kill(2) calls at a moment the log or the run
// directory shows.
#include <gtest/gtest.h>

#include <csignal>
#include <random>
#include <regex>

#include "matrix.h"
#include "matrix_expect.h"

namespace lm::test::matrix {

namespace {

std::string train(const Ctx& ctx, const std::string& more = "") { return "train -c " + ctx.config().string() + more; }

bool verifies(const Ctx& ctx, const fs::path& ck) { return ctx.lm("ckpt verify " + ck.string()).exit_code == 0; }

// SIGKILL at `phase` of the final save (step 4), then `--resume auto`: it must finish with the weights of
// an uninterrupted run.
Case kill_case(const std::string& phase, const std::string& when, const char* pattern = expect::kResumedAfterKill) {
  Case c{"kill_during_save_" + phase, "SIGKILL during the step-4 save, " + when + "; then `--resume auto`",
         pattern, 0,
         "the resumed run ends with the same model.safetensors SHA-256 as an uninterrupted run; no *.tmp-* is left",
         nullptr, nullptr};
  c.act = [phase](Ctx& ctx) {
    const RunResult killed = ctx.lm(train(ctx), "LMTRAIN_TEST_KILL_SAVE=step_00000004:" + phase);
    EXPECT_EQ(killed.exit_code, 128 + SIGKILL) << killed.output;
    return ctx.lm(train(ctx, " --resume auto"));
  };
  c.check = [](Ctx& ctx, const RunResult&) {
    EXPECT_EQ(manifest_sha(ctx / "run" / "step_00000004", "model.safetensors"), Ctx::base_final_sha());
    EXPECT_TRUE(ctx.entries_with("run", ".tmp-").empty());
  };
  return c;
}

// lmtrain_faults with `faults` on the shared config: exits `code`; step 2 stays the last good checkpoint.
Case step3_fault(std::string name, std::string input, std::string faults, const char* pattern) {
  Case c{name, input, pattern, 5, "step_00000002 verifies and `latest` still names it; no update was made", nullptr,
         nullptr};
  c.act = [faults](Ctx& ctx) { return ctx.lm(train(ctx), faults); };
  c.check = [](Ctx& ctx, const RunResult&) {
    EXPECT_TRUE(verifies(ctx, ctx / "run" / "step_00000002"));
    EXPECT_EQ(slurp(ctx / "run" / "latest"), "step_00000002\n");
    EXPECT_FALSE(fs::exists(ctx / "run" / "step_00000004"));
  };
  return c;
}

// `sample` on the shared run; a reading command leaves it as it was.
Case sample_case(std::string name, std::string input, std::string args, const char* pattern, int code = 2) {
  Case c{name, input, pattern, code, "the checkpoint still verifies", nullptr, nullptr};
  c.act = [args](Ctx& ctx) { return ctx.lm("sample --checkpoint " + Ctx::base_run().string() + " " + args); };
  c.check = [](Ctx& ctx, const RunResult&) { EXPECT_TRUE(verifies(ctx, Ctx::base_run() / "step_00000004")); };
  return c;
}

}  // namespace

std::vector<Case> process_cases() {
  std::vector<Case> out;
  Case ro{"run_dir_read_only", "run.dir without write permission (root's override dropped)", expect::kRunDirReadOnly, 2,
          "caught before step 1: the directory stays empty", nullptr, nullptr};
  ro.act = [](Ctx& ctx) {
    fs::create_directories(ctx / "run");
    fs::permissions(ctx / "run", fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read |
                                     fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
    return run_command(as_unprivileged() + LMTRAIN_BINARY + " " + train(ctx));
  };
  ro.check = [](Ctx& ctx, const RunResult&) {
    EXPECT_TRUE(fs::is_empty(ctx / "run"));
    fs::permissions(ctx / "run", fs::perms::owner_all);
  };
  out.push_back(ro);
  Case full{"disk_full_mid_run", "the step-2 save fails like a full disk", expect::kSaveFailedGoesOn, 0,
            "training goes on; the final checkpoint is saved and verifies; no *.tmp-* is left", nullptr, nullptr};
  full.act = [](Ctx& ctx) { return ctx.lm(train(ctx), "LMTRAIN_TEST_FAIL_SAVE=step_00000002"); };
  full.check = [](Ctx& ctx, const RunResult&) {
    EXPECT_TRUE(verifies(ctx, ctx / "run" / "step_00000004"));
    EXPECT_EQ(manifest_sha(ctx / "run" / "step_00000004", "model.safetensors"), Ctx::base_final_sha());
    EXPECT_TRUE(ctx.entries_with("run", ".tmp-").empty());
  };
  out.push_back(full);
  Case final_full{"disk_full_final_save", "the final (step-4) save fails like a full disk", expect::kFinalSaveFailed, 6,
                  "step_00000002 verifies and `latest` still names it; no *.tmp-* is left", nullptr, nullptr};
  final_full.act = [](Ctx& ctx) { return ctx.lm(train(ctx), "LMTRAIN_TEST_FAIL_SAVE=step_00000004"); };
  final_full.check = [](Ctx& ctx, const RunResult&) {
    EXPECT_TRUE(verifies(ctx, ctx / "run" / "step_00000002"));
    EXPECT_EQ(slurp(ctx / "run" / "latest"), "step_00000002\n");
    EXPECT_TRUE(ctx.entries_with("run", ".tmp-").empty());
  };
  out.push_back(final_full);
  out.push_back(kill_case("file", "after its first file"));
  out.push_back(kill_case("manifest", "after its manifest, before the rename"));
  out.push_back(kill_case("renamed", "after the rename, before `latest` moves"));
  out.push_back(kill_case("latest", "after `latest` moved (the run was complete: nothing to do)", expect::kNothingToDo));
  Case two{"two_trainers_one_run_dir", "a second `train` on a run.dir another trainer is using", expect::kRunLocked, 2,
           "the first trainer is undisturbed: stopped by SIGTERM it saves a checkpoint that verifies", nullptr, nullptr};
  two.act = [](Ctx& ctx) {
    const pid_t first = spawn_lmtrain(train(ctx), ctx / "first.log", hold_at(ctx.dir(), "step:1"));
    EXPECT_TRUE(held(ctx.dir(), "step:1")) << slurp(ctx / "first.log");
    RunResult second = ctx.lm(train(ctx));
    second.output += "\n(first pid " + std::to_string(first) + ")";
    ::kill(first, SIGTERM);
    EXPECT_EQ(wait_exit(first), 143) << slurp(ctx / "first.log");
    EXPECT_TRUE(std::regex_search(second.output, std::regex(subst(expect::kRunLocked, "%PID%", std::to_string(first)))));
    return second;
  };
  two.check = [](Ctx& ctx, const RunResult&) {
    EXPECT_TRUE(verifies(ctx, ctx / "run")) << slurp(ctx / "first.log");
  };
  two.pattern = subst(expect::kRunLocked, "%PID%", R"(\d+)");
  out.push_back(two);
  return out;
}

std::vector<Case> signal_cases() {
  std::vector<Case> out;
  Case prep{"sigint_during_tokenizer_training", "SIGINT while SentencePiece trains the run's tokenizer on a 2.4 MB corpus",
            subst(expect::kStopDuringPrepare, "%SIG%", "SIGINT"), 130,
            "no checkpoint, `latest` or token file is written; the tokenizer, once trained, is kept", nullptr, nullptr};
  prep.act = [](Ctx& ctx) {
    std::mt19937 rng(1);  // 30,000 lines of 12 made-up words: a second or more of tokenizer training
    const char* syllables[] = {"ka", "to", "mi", "ren", "sho", "la", "vi", "gor", "un", "bel", "tri", "os"};
    std::vector<std::string> words(3000);
    for (auto& w : words) {
      for (int k = 1 + static_cast<int>(rng() % 4); k > 0; --k) w += syllables[rng() % 12];
    }
    std::string text;
    for (int line = 0; line < 30000; ++line) {
      for (int k = 0; k < 12; ++k) text += words[rng() % words.size()] + (k < 11 ? " " : "\n");
    }
    const fs::path corpus = ctx.write("big.txt", text);
    return ctx.signal_when(train(ctx, " --set data.train=" + corpus.string()), "",
                           [](const std::string& log) { return log.find("tokenizer: preparing") != std::string::npos; },
                           SIGINT);
  };
  prep.check = [](Ctx& ctx, const RunResult&) {
    EXPECT_FALSE(fs::exists(ctx / "run" / "latest"));
    EXPECT_FALSE(fs::exists(ctx / "run" / "train.bin"));
    EXPECT_TRUE(ctx.entries_with("run", "step_").empty());
    EXPECT_TRUE(fs::exists(ctx / "run" / "tokenizer.model"));
  };
  out.push_back(prep);
  Case enc = prep;
  enc.name = "sigterm_during_encoding";
  enc.input = "SIGTERM after tokenizer training, while the corpus is encoded";
  enc.pattern = subst(expect::kStopDuringPrepare, "%SIG%", "SIGTERM");
  enc.exit_code = 143;
  enc.intact = "the trained tokenizer is kept for the next start; no token file or checkpoint is written";
  enc.act = [](Ctx& ctx) {
    return ctx.signal_at(train(ctx), "prepare:encode", SIGTERM);
  };
  enc.check = [](Ctx& ctx, const RunResult&) {
    EXPECT_TRUE(fs::exists(ctx / "run" / "tokenizer.model"));
    EXPECT_FALSE(fs::exists(ctx / "run" / "train.bin"));
    EXPECT_TRUE(ctx.entries_with("run", "step_").empty());
  };
  out.push_back(enc);
  Case eval{"sigint_during_final_validation", "SIGINT during the final validation", expect::kStopDuringFinalEval, 130,
            "the trained weights are saved first: step_00000004 verifies and equals an uninterrupted run's", nullptr,
            nullptr};
  eval.act = [](Ctx& ctx) {
    return ctx.signal_at(train(ctx), "eval", SIGINT);
  };
  eval.check = [](Ctx& ctx, const RunResult&) {
    EXPECT_TRUE(verifies(ctx, ctx / "run" / "step_00000004"));
    EXPECT_EQ(manifest_sha(ctx / "run" / "step_00000004", "model.safetensors"), Ctx::base_final_sha());
  };
  out.push_back(eval);
  Case save{"sigint_during_save", "SIGINT while the step-2 checkpoint is being written", expect::kStopDuringSave, 130,
            "the save completes first: step_00000002 verifies; no *.tmp-* is left", nullptr, nullptr};
  save.act = [](Ctx& ctx) {
    return ctx.signal_at(train(ctx), "save:step_00000002:file", SIGINT);
  };
  save.check = [](Ctx& ctx, const RunResult&) {
    EXPECT_TRUE(verifies(ctx, ctx / "run" / "step_00000002"));
    EXPECT_TRUE(ctx.entries_with("run", ".tmp-").empty());
    EXPECT_FALSE(fs::exists(ctx / "run" / "step_00000004"));
  };
  out.push_back(save);
  Case twice{"second_sigint", "a second SIGINT during the step-2 save (after its files, before the rename)", expect::kSecondSigint,
             130, "no checkpoint is committed half-written (only a *.tmp-* directory); `--resume auto` then finishes "
             "with an uninterrupted run's weights", nullptr, nullptr};
  twice.act = [](Ctx& ctx) {
    return ctx.signal_at(train(ctx), "save:step_00000002:file", SIGINT, "save:step_00000002:manifest");
  };
  twice.check = [](Ctx& ctx, const RunResult&) {
    EXPECT_FALSE(fs::exists(ctx / "run" / "step_00000002"));
    EXPECT_FALSE(ctx.entries_with("run", "step_00000002.tmp-").empty());
    const RunResult resumed = ctx.lm(train(ctx, " --resume auto"));
    EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
    EXPECT_EQ(manifest_sha(ctx / "run" / "step_00000004", "model.safetensors"), Ctx::base_final_sha());
  };
  out.push_back(twice);
  out.push_back(step3_fault("nan_loss", "a NaN loss and NaN gradients at step 3", "LMTRAIN_TEST_NAN_STEP=3",
                            expect::kNanLoss));
  out.push_back(step3_fault("inf_gradient", "one +Inf gradient at step 3 (finite loss)", "LMTRAIN_TEST_INF_GRAD_STEP=3",
                            expect::kInfGrad));
  return out;
}

// `report` on the shared run with `args` (an -o or --compare made by `prepare`): it writes nothing.
Case report_case(std::string name, std::string input, std::function<std::string(Ctx&)> prepare, const char* pattern,
                 int code) {
  Case c{name, input, pattern, code, "keep.html keeps its bytes; no report.html appears in the shared run", nullptr, nullptr};
  c.act = [prepare](Ctx& ctx) {
    std::ofstream(ctx / "keep.html") << "a page of someone else's";
    return ctx.lm("report " + Ctx::base_run().string() + " " + prepare(ctx));
  };
  c.check = [](Ctx& ctx, const RunResult&) {
    EXPECT_EQ(slurp(ctx / "keep.html"), "a page of someone else's");
    EXPECT_FALSE(fs::exists(Ctx::base_run() / "report.html"));
  };
  return c;
}

std::vector<Case> report_cases() {
  return {
      report_case("report_clobber", "`report -o FILE` naming a file that is not an lmtrain report",
                  [](Ctx& ctx) { return "-o " + (ctx / "keep.html").string(); }, expect::kReportClobber, 2),
      report_case("report_no_directory", "`report -o` into a directory that does not exist",
                  [](Ctx& ctx) { return "-o " + (ctx / "missing" / "r.html").string(); }, expect::kReportNoDir, 2),
      report_case("report_compare_other_tokenizer", "`report --compare` a checkpoint made with another tokenizer",
                  [](Ctx& ctx) {
                    const fs::path other = ctx / "other";
                    const std::string cfg = slurp(ctx.config());
                    std::ofstream(ctx / "other.yaml") << std::regex_replace(
                        std::regex_replace(cfg, std::regex("vocab_size: \\d+"), "vocab_size: 96"), std::regex("dir: [^,}\n]+"),
                        "dir: " + other.string());
                    EXPECT_EQ(ctx.lm("train -c " + (ctx / "other.yaml").string()).exit_code, 0);
                    return "--compare " + other.string() + " -o " + (ctx / "r.html").string();
                  },
                  expect::kReportOtherTokenizer, 4),
  };
}

std::vector<Case> sampling_cases() {
  std::vector<Case> out = report_cases();
  for (auto c : {
           sample_case("sample_empty_prompt", "--prompt \"\" (the table after a line start)", "--prompt ''",
                       expect::kEmptyPrompt, 0),
           sample_case("sample_unknown_characters", "a prompt with characters the tokenizer never saw",
                       "--prompt '日本 the 日' --generate 2", expect::kUnknownChars, 0),
           sample_case("sample_top_p_zero", "--top-p 0", "--prompt the --top-p 0", expect::kTopPZero),
           sample_case("sample_top_p_above_one", "--top-p 1.5", "--prompt the --top-p 1.5", expect::kTopPAbove),
           sample_case("sample_top_k_negative", "--top-k -1", "--prompt the --top-k -1", expect::kTopKNegative),
           sample_case("sample_temperature_negative", "--temperature -0.5", "--prompt the --temperature -0.5",
                       expect::kTemperatureNegative),
           sample_case("sample_seed_negative", "--seed -1 (would wrap to 2^64-1)", "--prompt the --seed -1",
                       expect::kSeedNegative),
           sample_case("sample_generate_too_many", "--generate 1000001", "--prompt the --generate 1000001",
                       expect::kGenerateTooMany),
           sample_case("sample_generate_beyond_window", "--generate 80 with max_seq_len 16 (the window slides)",
                       "--prompt the --generate 80", expect::kGenerateBeyondWindow, 0),
           sample_case("sample_extend_learned", "--extend-positions on a model with learned positions",
                       "--prompt the --generate 20 --extend-positions", expect::kExtendLearned),
       }) {
    out.push_back(c);
  }
  return out;
}

}  // namespace lm::test::matrix
