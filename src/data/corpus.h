// `lmtrain corpus get`: the project's example corpora from installed Debian packages, split into train and val
// files (docs/training.md "Corpora"). Free of LibTorch (the front executable runs it).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace lm::data {

/// The corpora `corpus get` knows: kjv, debian-faq, debian-faq-ko.
std::vector<std::string> corpus_names();

/// The Debian package a corpus comes from ("" for an unknown name).
std::string corpus_package(const std::string& name);

/// Writes `out_dir`/train.txt and val.txt (each written whole, then renamed into place) for corpus `name`:
/// - kjv: the King James Bible (`bible`), one verse per line, references stripped;
/// - debian-faq, debian-faq-ko: the Debian FAQ's text, one paragraph per line (join_paragraphs);
/// val is the last tenth of the lines (a contiguous tail), train the rest. Reads the installed package and
/// never installs one: a missing package throws DataError (exit 3) naming it and how to install it; an unknown
/// name throws ConfigError (exit 2). Returns what was written, for the log.
std::string fetch_corpus(const std::string& name, const std::filesystem::path& out_dir);

}  // namespace lm::data
