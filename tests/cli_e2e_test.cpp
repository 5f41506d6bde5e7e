// End to end through the real lmtrain binary: tokenizer -> prepare -> train -> checkpoint -> sample,
// Python reading the weights (model.safetensors), and bad input ending with one clear line and the right exit code.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <fstream>
#include <regex>

#include "test_util.h"
#include "util/fs.h"

namespace lm::test {

namespace {

std::string write_config(const ScratchDir& dir, const std::string& extra = "") {
  RunSpec spec;
  spec.train = "batch_size: 4, max_steps: 12, warmup_steps: 2, eval_every: 6, eval_batches: 2, log_every: 3";
  spec.extra = "checkpoint: {every: 6}\n" + extra;
  return write_run_config(dir, spec).string();
}

// The run ends with exactly one "error: ..." line (log lines may come before it), no trace, no crash.
void expect_clean_failure(const RunResult& r, int code, const std::string& needle) {
  EXPECT_EQ(r.exit_code, code) << r.output;
  const auto error_at = r.output.find("error: ");
  ASSERT_NE(error_at, std::string::npos) << r.output;
  const std::string error_line = r.output.substr(error_at);
  EXPECT_EQ(error_line.find('\n'), error_line.size() - 1) << "not a single last line: " << r.output;
  EXPECT_NE(error_line.find(needle), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("Exception raised from"), std::string::npos) << "stack trace: " << r.output;
  EXPECT_EQ(r.output.find("terminate called"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("Segmentation"), std::string::npos) << r.output;
}

}  // namespace

TEST(CliEndToEnd, TokenizerPrepareTrainCheckpointSample) {
  ScratchDir dir("e2e");
  // tokenizer and prepare as separate commands
  auto r = run_lmtrain("tokenizer train --input " + data_file("tiny_en.txt").string() + " --model " +
                       (dir / "tok.model").string() + " --vocab-size 96");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_lmtrain("tokenizer encode --model " + (dir / "tok.model").string() + " --text 'The river flows.'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_lmtrain("tokenizer decode --model " + (dir / "tok.model").string() + " --ids '" + r.output.substr(0, r.output.size() - 1) + "'");
  EXPECT_EQ(r.output, "The river flows.\n");
  r = run_lmtrain("prepare --tokenizer " + (dir / "tok.model").string() + " --input " +
                  data_file("tiny_en_val.txt").string() + " --output " + (dir / "val.bin").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::is_regular_file(dir / "val.bin"));

  // train makes its own tokenizer and token files
  r = run_lmtrain("train -c " + write_config(dir));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("final validation loss"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" bits/byte after 12 steps"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("decay groups"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("-> " + (dir / "run" / "tokenizer.model").string() + ", no byte pieces (an unknown character reads as <unk>"),
            std::string::npos) << "the tokenizer line says whether it has byte pieces: " << r.output;
  EXPECT_EQ(slurp(dir / "run" / "metrics.jsonl").find("\"bpb\":null"), std::string::npos) << "every validation has bits/byte";
  const std::string info = run_lmtrain("ckpt info " + (dir / "run").string()).output;
  EXPECT_TRUE(has_row(info, {"last_val_bpb"})) << info;  // every trainer_state field, from its list
  EXPECT_TRUE(has_row(info, {"data.train_tokens"})) << info;
  EXPECT_TRUE(fs::is_regular_file(dir / "run" / "step_00000006" / "manifest.json"));
  EXPECT_TRUE(fs::is_regular_file(dir / "run" / "step_00000012" / "model.safetensors"));
  EXPECT_TRUE(fs::is_regular_file(dir / "run" / "config.yaml"));
  EXPECT_TRUE(fs::is_regular_file(dir / "run" / "train.bin"));

  // metrics and the loss plot
  EXPECT_NE(slurp(dir / "run" / "metrics.jsonl").find("\"kind\":\"val\""), std::string::npos);
  r = run_lmtrain("plot " + (dir / "run").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(slurp(dir / "run" / "loss.png").substr(1, 3), "PNG");
  r = run_lmtrain("plot " + (dir / "nowhere").string());
  expect_clean_failure(r, 3, "no metrics");

  // a second run refuses to replace the first run's checkpoints unless told to
  r = run_lmtrain("train -c " + write_config(dir) + " --set train.max_steps=3 --set train.warmup_steps=0");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--overwrite"), std::string::npos) << r.output;
  EXPECT_TRUE(fs::is_regular_file(dir / "run" / "step_00000012" / "model.safetensors"));

  r = run_lmtrain("sample --checkpoint " + (dir / "run" / "step_00000012").string() +
                  " --prompt 'The river' --top-k 5 --generate 12 --seed 9 --precision fp32");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string first_sample = r.output;
  EXPECT_NE(r.output.find("rank"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("sample 1 of 1: 12 tokens"), std::string::npos) << r.output;
  auto again = run_lmtrain("sample --checkpoint " + (dir / "run" / "step_00000012").string() +
                           " --prompt 'The river' --top-k 5 --generate 12 --seed 9 --precision fp32");
  // (an explicit precision: auto's measured choice is logged with its ratio, which differs run to run)
  EXPECT_EQ(again.output, first_sample) << "same seed must give the same text";
  // a prompt character the tokenizer lacks is echoed as its code point, never as SentencePiece's "⁇"
  r = run_lmtrain("sample --checkpoint " + (dir / "run" / "step_00000012").string() +
                  " --prompt 'The 한 river' --generate 4 --seed 9 --precision fp32");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("\nThe <U+D55C> river"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("\xE2\x81\x87"), std::string::npos) << r.output;
  // a prompt ending in a cut UTF-8 sequence: its bytes shown as bytes, never as a made-up character
  r = run_lmtrain("sample --checkpoint " + (dir / "run" / "step_00000012").string() +
                  " --prompt \"$(printf 'The river \\344\\270')\" --generate 2 --seed 9 --precision fp32");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("The river <0xE4><0xB8>"), std::string::npos) << r.output;

  // with --overwrite the second run reuses the tokenizer and token files and replaces the checkpoints
  r = run_lmtrain("train -c " + write_config(dir) + " --set train.max_steps=3 --set train.warmup_steps=0 --overwrite");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("is current"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(dir / "run" / "step_00000012"));
  EXPECT_TRUE(fs::is_regular_file(dir / "run" / "step_00000003" / "manifest.json"));
}

TEST(CliEndToEnd, PythonReadsTheWeightsByName) {
  ScratchDir dir("py");
  auto r = run_lmtrain("train -c " + write_config(dir) + " --set train.max_steps=2 --set train.warmup_steps=0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // safetensors needs no code execution: Python reads it with json + numpy (or the safetensors package)
  r = run_command("/usr/bin/python3 -c \"import json, struct; f = open('" +
                  (dir / "run" / "step_00000002" / "model.safetensors").string() +
                  "', 'rb'); n = struct.unpack('<Q', f.read(8))[0]; h = json.loads(f.read(n)); "
                  "print(sorted(h)[:3]); print(h['tok_emb.weight']['shape']); print('head.weight' in h)\"");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("['__metadata__', 'blocks.0.attn.proj.bias', 'blocks.0.attn.proj.weight']"),
            std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[128, 32]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("False"), std::string::npos) << r.output;
}

TEST(CliEndToEnd, BadInputEndsWithOneClearLineAndAnExitCode) {
  ScratchDir dir("bad");
  // a misspelt key in the YAML file
  std::string text;
  {
    std::ifstream in(write_config(dir));
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  text.replace(text.find("n_layers"), 8, "n_layer");
  std::ofstream(dir / "typo.yaml") << text;
  auto r = run_lmtrain("train -c " + (dir / "typo.yaml").string());
  expect_clean_failure(r, 2, "unknown key 'model.n_layer'");
  EXPECT_NE(r.output.find("Did you mean 'model.n_layers'?"), std::string::npos) << r.output;
  r = run_lmtrain("train -c " + write_config(dir) + " --set train.max_step=3");
  expect_clean_failure(r, 2, "Did you mean 'train.max_steps'?");
  r = run_lmtrain("train -c " + write_config(dir) + " --set data.train=" + (dir / "missing.txt").string());
  expect_clean_failure(r, 3, "missing.txt");
  r = run_lmtrain("train -c " + write_config(dir) + " --set tokenizer.vocab_size=100000");
  expect_clean_failure(r, 3, "vocab_size=100000");
  EXPECT_FALSE(fs::exists(dir / "run")) << "a refused run left the run directory it made";
  r = run_lmtrain("sample --checkpoint " + (dir / "nowhere").string());
  expect_clean_failure(r, 4, "no checkpoint");
  fs::create_directories(dir / "run");  // a run directory that was there before is kept, even empty
  r = run_lmtrain("train -c " + write_config(dir) + " --set tokenizer.vocab_size=100000");
  expect_clean_failure(r, 3, "vocab_size=100000");
  EXPECT_TRUE(fs::exists(dir / "run"));
  // a missing corpus at an example corpus's path names the command that writes it; another, the path
  r = run_lmtrain("train -c " + write_config(dir) + " --set data.train=" + (dir / "data" / "debian-faq" / "train.txt").string());
  expect_clean_failure(r, 3, "Hint: `lmtrain corpus get debian-faq` writes it");
  r = run_lmtrain("train --no-such-flag");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = run_lmtrain("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.output.find("Exit codes"), std::string::npos);
  EXPECT_NE(r.output.find("a GGUF file for llama.cpp"), std::string::npos) << "--help names GGUF: " << r.output;
  EXPECT_NE(run_lmtrain("export --help").output.find("a GGUF file for llama.cpp"), std::string::npos);
}

// `lmtrain` is a small front without LibTorch (docs/ARCHITECTURE.md "Two executables"): `prepare` runs in
// it and never loads LibTorch, yet writes what lmtrain_full writes and fails the way it fails; every other
// command line goes to lmtrain_full; a front without lmtrain_full beside it says so.
// SIGTERM while `prepare` encodes: exit 143, its temporary shard removed, the earlier output byte for byte.
TEST(CliEndToEnd, PrepareStoppedBySigtermLeavesNoTemporaryAndKeepsTheOldOutput) {
  ScratchDir dir("prepare_stop");
  const std::string model = english_tokenizer_path().string();
  ASSERT_EQ(run_lmtrain("prepare --tokenizer " + model + " --input " + data_file("tiny_en.txt").string() + " --output " +
                        (dir / "out.bin").string()).exit_code, 0);
  const std::string before = slurp(dir / "out.bin");
  ASSERT_FALSE(before.empty());
  const std::string text = slurp(data_file("tiny_en.txt"));
  {  // a corpus that takes one encoder thread seconds: 24 MiB of the tiny file over and over
    std::ofstream big(dir / "big.txt");
    for (size_t n = 0; n < (size_t{24} << 20); n += text.size()) big << text;
  }
  const pid_t pid = spawn_lmtrain("prepare --threads 1 --block-mb 0.25 --tokenizer " + model + " --input " +
                                      (dir / "big.txt").string() + " --output " + (dir / "out.bin").string(),
                                  dir / "stop.log");
  auto temporaries = [&] {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir.path())) {
      if (e.path().filename().string().find(".tmp-") != std::string::npos) out.push_back(e.path().filename().string());
    }
    return out;
  };
  for (int i = 0; i < 60000 && temporaries().empty(); ++i) ::usleep(1000);  // the encoder has started writing
  ASSERT_FALSE(temporaries().empty()) << slurp(dir / "stop.log");
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid), 143) << slurp(dir / "stop.log");
  const std::string log = slurp(dir / "stop.log");
  EXPECT_NE(log.find("[prepare] stopped by SIGTERM while encoding"), std::string::npos) << log;
  EXPECT_TRUE(temporaries().empty()) << temporaries().front();
  EXPECT_EQ(slurp(dir / "out.bin"), before);
  // SIGKILL leaves its temporary shard; the next prepare of that output removes it (its process is gone) and
  // keeps one whose process still runs (this test's own pid)
  const pid_t killed = spawn_lmtrain("prepare --threads 1 --block-mb 0.25 --tokenizer " + model + " --input " +
                                         (dir / "big.txt").string() + " --output " + (dir / "out.bin").string(),
                                     dir / "kill.log");
  for (int i = 0; i < 60000 && temporaries().empty(); ++i) ::usleep(1000);
  ASSERT_FALSE(temporaries().empty()) << slurp(dir / "kill.log");
  ::kill(killed, SIGKILL);
  wait_exit(killed);
  ASSERT_EQ(temporaries().size(), 1u) << "a killed prepare left no temporary shard to clean";
  // kept: a live process's shard (this test's own suffix), and dead ones of other names: another output's
  // shard whose name starts the same, a file that is not a shard, another host's
  const std::string dead = std::to_string(killed), own = util::temp_suffix();  // tmp-PID-N-HOST
  const std::string host = own.substr(own.find('-', own.find('-', 4) + 1) + 1);
  std::vector<std::string> kept = {"out-00000.bin." + own, "out-b-00000.bin.tmp-" + dead + "-0-" + host,
                                   "out-notes.tmp-" + dead + "-1-x", "out-00001.bin.tmp-" + dead + "-2-another-host"};
  std::sort(kept.begin(), kept.end());
  for (const auto& k : kept) std::ofstream(dir / k) << "x";
  const auto again = run_lmtrain("prepare --tokenizer " + model + " --input " + data_file("tiny_en.txt").string() +
                                 " --output " + (dir / "out.bin").string());
  ASSERT_EQ(again.exit_code, 0) << again.output;
  auto left = temporaries();
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, kept);
  EXPECT_EQ(slurp(dir / "out.bin"), before);
}

TEST(CliEndToEnd, PrepareRunsInTheFrontWithoutLibTorch) {
  ScratchDir dir("front");
  const std::string model = english_tokenizer_path().string(), input = data_file("tiny_en.txt").string();
  const std::string full = LMTRAIN_FULL_BINARY;
  // LD_DEBUG=libs makes ld.so name every library it loads (on stderr, merged into the output)
  auto front = run_command("env LD_DEBUG=libs " + std::string(LMTRAIN_BINARY) + " -v prepare --tokenizer " + model +
                           " --input " + input + " --output " + (dir / "front.bin").string());
  ASSERT_EQ(front.exit_code, 0) << front.output;
  EXPECT_EQ(front.output.find("libtorch"), std::string::npos) << "prepare loaded LibTorch";
  EXPECT_NE(front.output.find("liblmtrain_spbridge"), std::string::npos) << front.output;
  auto versus = run_command("env LD_DEBUG=libs " + std::string(LMTRAIN_BINARY) + " --version");
  ASSERT_EQ(versus.exit_code, 0) << versus.output;
  EXPECT_NE(versus.output.find("libtorch_cpu"), std::string::npos) << "the check above could not see LibTorch";
  // lmtrain's version, the LibTorch it was built against, the commit
  EXPECT_TRUE(std::regex_search(versus.output, std::regex(R"(lmtrain \d+\.\d+\.\d+\nLibTorch \d+\.\d+\S* \((CPU|CUDA)\)\ncommit \S+)")))
      << versus.output;
  auto r = run_command(full + " prepare --tokenizer " + model + " --input " + input + " --output " + (dir / "full.bin").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(slurp(dir / "front.bin"), slurp(dir / "full.bin"));
  EXPECT_NE(r.output.find("tokens, 2-byte ids, vocab 128"), std::string::npos) << r.output;
  EXPECT_NE(front.output.find("tokens, 2-byte ids, vocab 128"), std::string::npos) << front.output;

  // the same errors, word for word, with the same exit codes
  for (const std::string& args : {"prepare --tokenizer " + model + " --input " + (dir / "missing.txt").string() +
                                      " --output " + (dir / "x.bin").string(),
                                  std::string("prepare --tokenizer ") + model, std::string("prepare --no-such-flag")}) {
    auto a = run_lmtrain(args), b = run_command(full + " " + args);
    EXPECT_NE(a.exit_code, 0) << a.output;
    EXPECT_EQ(a.exit_code, b.exit_code) << args;
    EXPECT_EQ(a.output.substr(a.output.find("error: ")), b.output.substr(b.output.find("error: "))) << args;
  }
  EXPECT_FALSE(fs::exists(dir / "x.bin"));
  EXPECT_EQ(run_lmtrain("prepare --help").output.substr(0, 60), run_command(full + " prepare --help").output.substr(0, 60));

  // a front alone: every command but prepare needs lmtrain_full
  fs::create_directories(dir / "alone");
  fs::copy_file(LMTRAIN_BINARY, dir / "alone" / "lmtrain");
  r = run_command((dir / "alone" / "lmtrain").string() + " --version");
  expect_clean_failure(r, 1, "cannot start " + (dir / "alone" / "lmtrain_full").string());
}

// `corpus get` runs in the front (no LibTorch) and writes the split; a package dpkg reports missing gives exit 3
// naming it and how to install it, and writes nothing (dpkg-query is replaced on PATH by a script that answers
// as dpkg-query does for a removed package).
TEST(CliEndToEnd, CorpusGetSplitsAnInstalledPackageAndNamesAMissingOne) {
  ScratchDir dir("corpus");
  const bool faq = run_command("dpkg-query -W -f='${Status}' debian-faq").output.find("install ok installed") !=
                   std::string::npos;
  if (faq) {
    auto r = run_command("env LD_DEBUG=libs " + std::string(LMTRAIN_BINARY) + " corpus get debian-faq --out " +
                         (dir / "faq").string());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output.find("libtorch"), std::string::npos) << "corpus get loaded LibTorch";
    EXPECT_NE(r.output.find("878 train lines, 97 val lines in " + (dir / "faq").string()), std::string::npos) << r.output;
    const std::string val = slurp(dir / "faq" / "val.txt");
    EXPECT_EQ(std::count(val.begin(), val.end(), '\n'), 97);
  }
  fs::create_directories(dir / "bin");
  std::ofstream(dir / "bin" / "dpkg-query") << "#!/bin/sh\nprintf 'deinstall ok config-files'\n";
  fs::permissions(dir / "bin" / "dpkg-query", fs::perms::owner_all);
  auto r = run_command("env PATH=" + (dir / "bin").string() + ":$PATH " + std::string(LMTRAIN_BINARY) +
                       " corpus get kjv --out " + (dir / "kjv").string());
  expect_clean_failure(r, 3, "the Debian package bible-kjv, which is not installed. Hint: apt-get install bible-kjv");
  EXPECT_FALSE(fs::exists(dir / "kjv"));
  r = run_lmtrain("corpus get wikipedia --out " + (dir / "w").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("kjv"), std::string::npos) << r.output;
}

}  // namespace lm::test
