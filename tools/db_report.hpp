#pragma once
// gemm-db report --html: what the tuning database holds, per GPU, as one self-contained page:
// our TFLOP/s beside cuBLAS's, the ratio, every candidate of every problem (why the winner won),
// stale and failed rows. Plots are drawn by Chart.js, inlined into the page, so that viewing it
// needs no network.
#include <string>

#include "db_summary.hpp"
#include "gemmtune/cache/tuning_db.hpp"

namespace gemmtune::cli {

struct ReportCounts {
  int gpus = 0, problems = 0, candidates = 0, charts = 0;
};

// The page for the rows matching filter; counts says what it shows.
std::string html_report(const TuningDb& db, const ProblemFilter& filter, ReportCounts& counts);

}  // namespace gemmtune::cli
