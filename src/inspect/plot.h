// Loss curves: reads RUN/metrics.jsonl and draws train loss, validation loss and the learning rate to a
// PNG with gnuplot (Debian's gnuplot-nox, pngcairo terminal), run as a subprocess.
#pragma once

#include <filesystem>

namespace lm::inspect {

/// Writes `png` (default RUN/loss.png when empty) from RUN/metrics.jsonl; returns the path written.
/// Throws DataError when the metrics are missing or empty, Error(kInternal) when gnuplot fails.
std::filesystem::path plot_run(const std::filesystem::path& run_dir, std::filesystem::path png);

}  // namespace lm::inspect
