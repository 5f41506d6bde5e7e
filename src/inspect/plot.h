// Loss curves: reads RUN/metrics.jsonl and draws train loss, validation loss and the learning rate to a
// PNG with gnuplot (Debian's gnuplot-nox, pngcairo terminal), run as a subprocess.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace lm::inspect {

/// The gnuplot script of plot_run: data files train.dat (step loss lr), val.dat and full.dat (step loss) in
/// `dir`; a legend entry only for the validation series that exist; both panels over steps 0..max_step;
/// titles as typed (no gnuplot "enhanced" text, where _ means a subscript); the loss axis labelled with
/// `loss_unit` (metrics.jsonl's, train/metrics.h).
std::string plot_script(const std::filesystem::path& dir, const std::filesystem::path& png, const std::string& title,
                        bool has_val, bool has_full, int64_t max_step, const std::string& loss_unit = "nats/token");

/// Writes `png` (default RUN/loss.png when empty) from RUN/metrics.jsonl; returns the path written.
/// Throws DataError when the metrics are missing or empty, Error(kInternal) when gnuplot fails.
std::filesystem::path plot_run(const std::filesystem::path& run_dir, std::filesystem::path png);

}  // namespace lm::inspect
