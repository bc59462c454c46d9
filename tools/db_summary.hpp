#pragma once
// What gemm-db's views share about a tuned problem: its ratio to cuBLAS and why its winner won.
#include <optional>
#include <string>
#include <vector>

#include "gemmtune/cache/tuning_db.hpp"

namespace gemmtune::cli {

// gemm-db's filters: the database's, and the scaling and accumulation, which DbFilter does not
// have (yet): rows are filtered by them here, after they are read.
struct ProblemFilter {
  DbFilter db;
  std::optional<Scaling> scaling;
  std::optional<Accumulation> accumulation;
  bool matches(const Problem& p) const {
    return (!scaling || p.scaling == *scaling) &&
           (!accumulation || p.accumulation == *accumulation);
  }
};

// A problem's data types as gemm-db shows them: "bf16", "f16*bf16->f32", followed by the scaling
// where it is not none ("e4m3*e4m3->bf16 scaling=tensor"), the accumulation where it is fast and
// the precision where it is not exact, as describe() does ("e4m3*e4m3->bf16 scaling=tensor
// accum=fast", "f32 precision=tf32").
std::string types_text(const Problem& p);
// Its scaling, accumulation and precision as types_text() shows them after the types: "" for
// none, precise and exact, else " scaling=row accum=fast", " precision=tf32".
std::string computing_text(const Problem& p);
// Its groups as gemm-db shows them after the shape, as describe() does: "" for one GEMM,
// " groups=G", " groups=G masked" for the masked group layout.
std::string groups_text(const Problem& p);
// Its epilogue as gemm-db shows it after the groups, as describe() does: "" for none, else
// " epilogue=bias,gelu".
std::string epilogue_text(const Problem& p);
// Its shape as gemm-db's tables show it: "4096x8x4096", then groups_text() (N is of all the
// groups), epilogue_text() and " beta!=0" where it reads C.
std::string shape_text(const Problem& p);

// cuBLAS time over ours: above 1 means faster than cuBLAS; -1 when either is unknown.
double cublas_ratio(const BestRecord& best);
std::string ratio_text(double ratio);  // "1.03x", "-" when unknown

bool is_winner(const CandidateRecord& c, const std::optional<BestRecord>& best);

// One sentence on why the winner won: its margin over the runner-up and its ratio to cuBLAS.
std::string why_it_won(const BestRecord& best, const std::vector<CandidateRecord>& candidates);

}  // namespace gemmtune::cli
