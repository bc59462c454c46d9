#pragma once
// What gemm-db's views share about a tuned problem: its ratio to cuBLAS and why its winner won.
#include <optional>
#include <string>
#include <vector>

#include "gemmtune/cache/tuning_db.hpp"

namespace gemmtune::cli {

// cuBLAS time over ours: above 1 means faster than cuBLAS; -1 when either is unknown.
double cublas_ratio(const BestRecord& best);
std::string ratio_text(double ratio);  // "1.03x", "-" when unknown

bool is_winner(const CandidateRecord& c, const std::optional<BestRecord>& best);

// One sentence on why the winner won: its margin over the runner-up and its ratio to cuBLAS.
std::string why_it_won(const BestRecord& best, const std::vector<CandidateRecord>& candidates);

}  // namespace gemmtune::cli
