#pragma once
// The messages between the tuner and its worker process: one JSON object per line.
//   tuner -> worker: {"cmd":"setup", device, problem, alpha, beta, seed, timing}   worker:
//   {"event":"ready"}
//                    {"cmd":"measure", "id", "config", [early stops]}       worker:
//                    {"event":"result", candidate}
//                    {"cmd":"baseline"}                                     worker:
//                    {"event":"baseline", ...}
//                    {"cmd":"retime", "configs", "baseline"}   worker: {"event":"timings", timings,
//                    baseline}
//                      (verified candidates, and cuBLAS when asked, timed again in turns)
//                    {"cmd":"quit"}
// A worker that hits a sticky CUDA error answers, then exits: its context is poisoned.
#include <nlohmann/json.hpp>

#include "gemmtune/cache/tuning_db.hpp"
#include "gemmtune/tuner/timer.hpp"

namespace gemmtune {

nlohmann::json to_json(const Problem& p);
Problem problem_from_json(const nlohmann::json& j);
nlohmann::json to_json(const TimingSettings& t);
TimingSettings timing_from_json(const nlohmann::json& j);
nlohmann::json to_json(const Timing& t);
Timing result_timing_from_json(const nlohmann::json& j);
nlohmann::json to_json(const CandidateRecord& c);
CandidateRecord candidate_from_json(const nlohmann::json& j);

}  // namespace gemmtune
