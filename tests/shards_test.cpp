// Corpora of many files and sharded token data: directories and globs listed, a directory of files is their
// concatenation, windows cross shard boundaries, staleness follows every file, a bad file is named, the
// streamed parallel prepare writes the single-threaded bytes with a bounded number of blocks alive, whole
// files held out, tokenizer sampling seeded; and through the binary: same losses, bitwise resume mid-shard.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>

#include "checkpoint/checkpoint.h"
#include "data/batcher.h"
#include "data/prepare.h"
#include "data/split.h"
#include "data/token_file.h"
#include "tokenizer/corpus_text.h"
#include "test_util.h"
#include "util/errors.h"
#include "util/hash.h"

namespace lm::test {

namespace {

// tiny_en.txt cut into `parts` files under dir/corpus (named so that sorting by path keeps their order, one in
// a subfolder), and the same text as one file dir/all.txt.
fs::path write_parts(const ScratchDir& dir, int parts) {
  const auto lines = lines_of(slurp(data_file("tiny_en.txt")));
  const fs::path root = dir / "corpus";
  fs::create_directories(root / "sub");
  std::ofstream all(dir / "all.txt");
  for (int p = 0; p < parts; ++p) {
    const fs::path f = p == parts - 1 ? root / "sub" / "z.txt" : root / ("part" + std::to_string(p) + ".txt");
    std::ofstream out(f);
    for (size_t i = p * lines.size() / parts; i < (p + 1) * lines.size() / parts; ++i) {
      out << lines[i] << "\n";
      all << lines[i] << "\n";
    }
  }
  return root;
}

std::vector<int64_t> all_ids(const data::TokenFile& f) {
  std::vector<int64_t> ids(f.size());
  f.copy(0, f.size(), ids.data());
  return ids;
}

data::PrepareOptions options(int threads, size_t block_bytes, uint64_t shard_tokens = data::kDefaultShardTokens) {
  data::PrepareOptions o;
  o.threads = threads;
  o.block_bytes = block_bytes;
  o.shard_tokens = shard_tokens;
  return o;
}

}  // namespace

TEST(CorpusFiles, DirectoriesRecurseSortedWithoutHiddenNamesAndGlobsMatch) {
  ScratchDir dir("corpus_files");
  const fs::path root = write_parts(dir, 5);
  fs::create_directories(root / ".git");
  std::ofstream(root / ".git" / "HEAD") << "ref\n";
  std::ofstream(root / ".hidden.txt") << "x\n";
  const auto files = tokenizer::list_corpus_files(root.string(), "training corpus");
  ASSERT_EQ(files.size(), 5u);
  EXPECT_EQ(files.front(), root / "part0.txt");
  EXPECT_EQ(files.back(), root / "sub" / "z.txt");
  EXPECT_TRUE(std::is_sorted(files.begin(), files.end()));
  const auto globbed = tokenizer::list_corpus_files((root / "part*.txt").string(), "training corpus");
  EXPECT_EQ(globbed, std::vector<fs::path>(files.begin(), files.end() - 1));
  try {
    tokenizer::list_corpus_files((root / "nothing*.txt").string(), "training corpus");
    ADD_FAILURE() << "a pattern without matches was accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("matches no file"), std::string::npos) << e.what();
  }
  fs::create_directories(dir / "empty" / ".only-hidden");
  try {
    tokenizer::list_corpus_files((dir / "empty").string(), "training corpus");
    ADD_FAILURE() << "an empty directory was accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("holds no files"), std::string::npos) << e.what();
  }
}

// Five files prepare to the ids of their concatenation, and read back as one stream across shards.
TEST(Shards, ADirectoryOfFilesIsTheirConcatenationAcrossShardBoundaries) {
  ScratchDir dir("shards_concat");
  const fs::path root = write_parts(dir, 5);
  tokenizer::Tokenizer tok(english_tokenizer_path());
  data::prepare_corpus({dir / "all.txt"}, tok, dir / "one.bin");
  const auto files = tokenizer::list_corpus_files(root.string(), "training corpus");
  const auto info = data::prepare_corpus(files, tok, dir / "many.bin", options(2, 512, 1024));
  EXPECT_FALSE(fs::exists(dir / "many.bin"));  // several files: an index and its shards
  ASSERT_TRUE(fs::exists(dir / "many.index.json"));
  EXPECT_TRUE(fs::exists(dir / "many-00000.bin"));
  const data::TokenFile one(dir / "one.bin"), many(dir / "many.bin");
  ASSERT_GT(info.shards, 1u) << "shard_tokens 1024 splits " << info.count << " tokens";
  EXPECT_EQ(many.info().shards, info.shards);
  EXPECT_EQ(many.path(), dir / "many.index.json");
  EXPECT_EQ(all_ids(many), all_ids(one));
  EXPECT_EQ(many.at(1024), one.at(1024));
  EXPECT_EQ(data::read_token_inputs(dir / "many.bin").size(), 5u);
  EXPECT_EQ(data::read_token_file_info(dir / "many.bin").count, one.size());

  // A window over the first boundary (tokens 1020..1036) is the same window of the single file.
  std::vector<int64_t> a(17), b(17);
  one.copy(1020, 17, a.data());
  many.copy(1020, 17, b.data());
  EXPECT_EQ(a, b);
  // The Batcher draws the same batches from both.
  const data::Batcher from_one(one, 4, 16, 7), from_many(many, 4, 16, 7);
  for (uint64_t k = 0; k < 50; ++k) {
    EXPECT_TRUE(torch::equal(from_one.at(k).x, from_many.at(k).x)) << "batch " << k;
    EXPECT_TRUE(torch::equal(from_one.at(k).y, from_many.at(k).y)) << "batch " << k;
  }
  // Re-prepared as one shard of one file, the index and its shards go.
  data::prepare_corpus({dir / "all.txt"}, tok, dir / "many.bin");
  EXPECT_TRUE(fs::exists(dir / "many.bin"));
  EXPECT_FALSE(fs::exists(dir / "many.index.json"));
  EXPECT_FALSE(fs::exists(dir / "many-00000.bin"));
  EXPECT_FALSE(fs::exists(dir / "many-00001.bin"));
}

TEST(Shards, AChangedAddedOrRemovedFileMakesTheDataStale) {
  ScratchDir dir("shards_stale");
  const fs::path root = write_parts(dir, 5);
  tokenizer::Tokenizer tok(english_tokenizer_path());
  auto files = tokenizer::list_corpus_files(root.string(), "training corpus");
  data::prepare_corpus(files, tok, dir / "d.bin");
  EXPECT_TRUE(data::token_file_is_current(files, tok, dir / "d.bin"));
  std::ofstream(root / "part1.txt", std::ios::app) << "One more line.\n";
  EXPECT_FALSE(data::token_file_is_current(files, tok, dir / "d.bin")) << "changed";
  data::prepare_corpus(files, tok, dir / "d.bin");
  EXPECT_TRUE(data::token_file_is_current(files, tok, dir / "d.bin"));
  std::ofstream(root / "part9.txt") << "A new file.\n";
  EXPECT_FALSE(data::token_file_is_current(tokenizer::list_corpus_files(root.string(), "c"), tok, dir / "d.bin"))
      << "added";
  fs::remove(root / "part9.txt");
  fs::remove(root / "part0.txt");
  EXPECT_FALSE(data::token_file_is_current(tokenizer::list_corpus_files(root.string(), "c"), tok, dir / "d.bin"))
      << "removed";
  files = tokenizer::list_corpus_files(root.string(), "c");
  data::prepare_corpus(files, tok, dir / "d.bin");
  EXPECT_TRUE(data::token_file_is_current(files, tok, dir / "d.bin"));
  // The same folder spelled another way is the same corpus.
  EXPECT_TRUE(data::token_file_is_current(tokenizer::list_corpus_files((root / "." / "").string(), "c"), tok,
                                          dir / "d.bin"));
  fs::rename(root / "part2.txt", root / "part0.txt");  // same bytes, another name
  EXPECT_FALSE(data::token_file_is_current(tokenizer::list_corpus_files(root.string(), "c"), tok, dir / "d.bin"))
      << "renamed";
}

TEST(Shards, ABadFileInADirectoryIsNamedAndNothingIsWritten) {
  ScratchDir dir("shards_bad");
  const fs::path root = write_parts(dir, 5);
  tokenizer::Tokenizer tok(english_tokenizer_path());
  const size_t before = lines_of(slurp(root / "part2.txt")).size();
  std::ofstream(root / "part2.txt", std::ios::app) << "fine line\nbad \xff byte\n";
  const auto files = tokenizer::list_corpus_files(root.string(), "training corpus");
  try {
    data::prepare_corpus(files, tok, dir / "d.bin", options(2, 256));  // the bad line is blocks into the file
    ADD_FAILURE() << "invalid UTF-8 was accepted";
  } catch (const DataError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find((root / "part2.txt").string() + ":" + std::to_string(before + 2) + ":5: invalid UTF-8"),
              std::string::npos) << m;
    EXPECT_NE(m.find("invalid UTF-8"), std::string::npos) << m;
  }
  EXPECT_FALSE(data::token_data_exists(dir / "d.bin"));
  for (const auto& e : fs::directory_iterator(dir.path())) {
    EXPECT_EQ(e.path().string().find("d-0"), std::string::npos) << "left behind: " << e.path();
  }
  std::ofstream(root / "part2.txt", std::ios::trunc) << "\n  \n";
  try {
    data::prepare_corpus(files, tok, dir / "d.bin");
    ADD_FAILURE() << "a blank file was accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find((root / "part2.txt").string() + "' holds no text"), std::string::npos) << e.what();
  }
}

// Many small blocks on several threads give the bytes of one thread; a thread holds one block at a time.
TEST(Prepare, StreamedBlocksOnThreadsWriteTheSingleThreadedBytesWithFewBlocksAlive) {
  ScratchDir dir("prep_blocks");
  const fs::path root = write_parts(dir, 5);
  tokenizer::Tokenizer tok(english_tokenizer_path());
  const auto files = tokenizer::list_corpus_files(root.string(), "training corpus");
  data::PrepareStats one_stats;
  data::prepare_corpus(files, tok, dir / "one.bin", options(1, size_t{1} << 20), &one_stats);
  EXPECT_EQ(one_stats.blocks, 5u) << "one block per file";
  const std::string one = slurp(dir / "one-00000.bin");
  ASSERT_GT(one.size(), 1000u);
  for (int threads : {2, 3, 8}) {
    data::PrepareStats stats;
    data::prepare_corpus(files, tok, dir / "many.bin", options(threads, 64), &stats);
    EXPECT_EQ(slurp(dir / "many-00000.bin"), one) << threads << " threads";
    EXPECT_GT(stats.blocks, 8u * static_cast<uint64_t>(threads)) << "the input is many blocks";
    EXPECT_LE(stats.max_blocks_alive, static_cast<uint64_t>(threads));
    EXPECT_GE(stats.max_blocks_alive, 1u);
    EXPECT_EQ(stats.lines, one_stats.lines);
  }
}

// Blocks are whole lines of one file for any block size: a last line without a newline, a file whose size
// is a multiple of the block, lines longer than the block; a line over kMaxLineBytes without a newline yet.
TEST(CorpusReader, BlocksAreWholeLinesOfOneFileForAnyBlockSize) {
  ScratchDir dir("corpus_reader");
  const std::vector<std::pair<std::string, std::string>> texts = {
      {"a.txt", "one\ntwo lines\nno newline at the end"},
      {"b.txt", "0123456\n89abcde\n"},  // 16 bytes: a multiple of blocks of 1, 2, 4, 8 and 16
      {"c.txt", std::string(300, 'x') + "\nshort\n\n  \n"}};
  tokenizer::CorpusFiles files;
  for (const auto& [name, text] : texts) {
    std::ofstream(dir / name, std::ios::binary) << text;
    files.push_back(dir / name);
  }
  for (size_t block : {1, 2, 7, 8, 16, 64, 4096}) {
    tokenizer::CorpusReader reader(files, block);
    std::vector<std::string> got(files.size());
    std::string b;
    size_t file = 0, total = 0;
    while (reader.next(b)) {
      while (file + 1 < files.size() && got[file].size() == texts[file].second.size()) ++file;
      EXPECT_TRUE(b.back() == '\n' || got[file].size() + b.size() == texts[file].second.size()) << block;
      got[file] += b;
      total += b.size();
    }
    for (size_t i = 0; i < files.size(); ++i) EXPECT_EQ(got[i], texts[i].second) << "block " << block;
    EXPECT_EQ(reader.bytes_read(), total);
    EXPECT_EQ(reader.lines_read(), 3u + 2u + 4u) << "block " << block;
    ASSERT_EQ(reader.inputs().size(), 3u);
    EXPECT_EQ(reader.inputs()[1].sha256, util::sha256_file(dir / "b.txt"));
    EXPECT_EQ(reader.inputs()[2].bytes, texts[2].second.size());
  }
  std::ofstream(dir / "long.txt", std::ios::binary) << "fine\n" << std::string(tokenizer::kMaxLineBytes + 10, 'y');
  tokenizer::CorpusReader reader({dir / "long.txt"}, 64 * 1024);
  std::string b;
  try {
    while (reader.next(b)) {
    }
    ADD_FAILURE() << "an over-long line was accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("long.txt:2:1: line longer than"), std::string::npos) << e.what();
  }
}

TEST(Split, WholeFilesAreHeldOutByTheSeed) {
  std::vector<fs::path> files;
  for (int i = 0; i < 40; ++i) files.emplace_back("f" + std::to_string(100 + i));
  const auto a = data::hold_out_files(files, 0.05, 3), b = data::hold_out_files(files, 0.05, 3);
  EXPECT_EQ(a.val, b.val);
  EXPECT_EQ(a.val.size(), 2u);
  EXPECT_EQ(a.train.size(), 38u);
  EXPECT_TRUE(std::is_sorted(a.val.begin(), a.val.end()));
  EXPECT_NE(data::hold_out_files(files, 0.05, 4).val, a.val);
  const auto two = data::hold_out_files({"a", "b"}, 0.01, 1);
  EXPECT_EQ(two.val.size(), 1u);
  EXPECT_EQ(two.train.size(), 1u);
}

// The sample of lines is a function of the seed; the log says how large it is.
TEST(TokenizerSample, SeededAndLogged) {
  ScratchDir dir("tok_sample");
  const fs::path root = write_parts(dir, 5);
  auto train = [&](const std::string& name, int seed) {
    auto r = run_lmtrain("tokenizer train --input " + root.string() + " --model " + (dir / name).string() +
                         " --vocab-size 100 --max-sentences 40 --seed " + std::to_string(seed));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.output;
  };
  const std::string log = train("a.model", 1);
  EXPECT_NE(log.find("training on a sample of 40 of 70 lines"), std::string::npos) << log;
  train("b.model", 1);
  train("c.model", 2);
  auto pieces = [&](const std::string& name) {  // the model file also records its temporary paths: compare pieces
    tokenizer::Tokenizer tok(dir / name);
    std::vector<std::string> out;
    for (int32_t i = 0; i < tok.vocab_size(); ++i) out.push_back(tok.piece(i));
    return out;
  };
  EXPECT_EQ(pieces("a.model"), pieces("b.model"));
  EXPECT_NE(pieces("a.model"), pieces("c.model"));
  for (const auto& e : fs::directory_iterator(dir.path())) {
    EXPECT_EQ(e.path().string().find(".model.tmp"), std::string::npos) << "left behind: " << e.path();
  }
}

// Through the binary: a directory trains with the losses of its concatenation; a resume in the middle of a
// shard is bitwise; the held-out files of a directory without data.val are named in the log.
TEST(Shards, TrainingOnADirectoryMatchesItsConcatenationAndResumesBitwiseMidShard) {
  ScratchDir dir("shards_train");
  const fs::path root = write_parts(dir, 5);
  auto config = [&](const std::string& run, const std::string& train) {
    RunSpec spec;
    spec.run = run;
    spec.train_text = train;
    spec.train = "batch_size: 4, max_steps: 12, warmup_steps: 2, lr: 0.01, eval_every: 0, log_every: 1";
    spec.extra = "checkpoint: {every: 6, keep_last: 2}\n";
    return "train -c " + write_run_config(dir, spec).string() + " --set data.shard_tokens=1024";
  };
  auto concat = run_lmtrain(config("concat", (dir / "all.txt").string()));
  ASSERT_EQ(concat.exit_code, 0) << concat.output;
  auto straight = run_lmtrain(config("straight", root.string()));
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  EXPECT_TRUE(fs::exists(dir / "straight" / "train.index.json"));
  EXPECT_TRUE(fs::exists(dir / "straight" / "train-00001.bin")) << straight.output;
  EXPECT_EQ(losses(dir / "straight"), losses(dir / "concat"));
  ASSERT_EQ(losses(dir / "straight").size(), 12u);

  pid_t pid = spawn_lmtrain(config("split", root.string()), dir / "split1.log", hold_at(dir, "step:5"));
  ASSERT_TRUE(held(dir, "step:5")) << slurp(dir / "split1.log");
  ::kill(pid, SIGTERM);
  EXPECT_EQ(wait_exit(pid), 143) << slurp(dir / "split1.log");
  auto resumed = run_lmtrain(config("split", root.string()) + " --resume auto");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_EQ(losses(dir / "split"), losses(dir / "straight"));
  EXPECT_EQ(manifest_sha(dir / "split" / checkpoint::step_name(12), "model.safetensors"),
            manifest_sha(dir / "straight" / checkpoint::step_name(12), "model.safetensors"));

  // A changed file: the resume refuses (the data is not what the checkpoint trained on).
  std::ofstream(root / "part1.txt", std::ios::app) << "Changed.\n";
  auto changed = run_lmtrain(config("split", root.string()) + " --resume auto --set train.max_steps=14");
  EXPECT_EQ(changed.exit_code, 4) << changed.output;
  EXPECT_NE(changed.output.find("data.train (sha256)"), std::string::npos) << changed.output;

  // No data.val: whole files are held out, and the log names them.
  RunSpec held_spec;
  held_spec.run = "held";
  held_spec.train_text = root.string();
  held_spec.val_text = "";
  held_spec.train = "batch_size: 4, max_steps: 2, warmup_steps: 1, eval_every: 0";
  auto held_out = run_lmtrain("train -c " + write_run_config(dir, held_spec).string());
  ASSERT_EQ(held_out.exit_code, 0) << held_out.output;
  EXPECT_NE(held_out.output.find("held out 1 of 5 files"), std::string::npos) << held_out.output;

  // run.dir inside the corpus folder: refused before anything is read or written.
  RunSpec inside = held_spec;
  inside.run = "corpus/sub/run";
  auto refused = run_lmtrain("train -c " + write_run_config(dir, inside).string());
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("holds run.dir"), std::string::npos) << refused.output;
  EXPECT_FALSE(fs::exists(root / "sub" / "run"));
}

// A stop asked for between blocks (Ctrl-C in `lmtrain train`) ends the preparation with what the check threw,
// and leaves neither token data nor temporary shards; what was there before stays.
TEST(Prepare, AStopBetweenBlocksLeavesWhatWasThere) {
  ScratchDir dir("prep_stop");
  const fs::path root = write_parts(dir, 5);
  tokenizer::Tokenizer tok(english_tokenizer_path());
  const auto files = tokenizer::list_corpus_files(root.string(), "training corpus");
  data::prepare_corpus({dir / "all.txt"}, tok, dir / "d.bin");
  const std::string before = slurp(dir / "d.bin");
  auto opts = options(2, 64, 1024);
  int blocks = 0;
  opts.check_stop = [&] {
    if (++blocks == 20) throw Interrupted(ExitCode::kSigInt, "stopped");
  };
  EXPECT_THROW(data::prepare_corpus(files, tok, dir / "d.bin", opts), Interrupted);
  EXPECT_EQ(slurp(dir / "d.bin"), before);
  EXPECT_FALSE(fs::exists(dir / "d.index.json"));
  for (const auto& e : fs::directory_iterator(dir.path())) {
    EXPECT_EQ(e.path().filename().string().find("d-0"), std::string::npos) << "left behind: " << e.path();
  }
}

}  // namespace lm::test
