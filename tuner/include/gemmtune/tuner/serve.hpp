#pragma once
// The tuning daemon (gemm-tune --serve): takes the problems that processes served without a
// tuned kernel from the database's queue (TuningDb::enqueue, GEMMTUNE_TUNE=background) and tunes
// them, highest priority first, one at a time per GPU.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "gemmtune/tuner/tuner.hpp"

namespace gemmtune {

struct ServeOptions {
  TuneOptions tune;                // the database, the budget of each problem, the search
  std::vector<int> gpus;           // ordinals; each takes the entries of its own GPU model
  bool once = false;               // stop when nothing of theirs waits (tests, GEMMTUNE_TUNE=now)
  std::optional<int64_t> only_id;  // take this entry only (GEMMTUNE_TUNE=now)
  double poll_s = 1.0;             // how often an idle GPU looks at the queue
  double heartbeat_s = 5.0;        // how often a claim says it is alive
  // A claim older than this without a heartbeat is a dead daemon's (another host's: a local
  // daemon's death is seen at once, by its pid).
  double stale_s = 600.0;
  std::function<void(const std::string&)> log;  // a line per event, for people
};

struct ServeSummary {
  int tuned = 0, failed = 0, released = 0;  // released: claims of dead daemons put back
};

// Serves until stop_requested() (or, with once, until nothing waits). A problem whose tuning
// throws is marked failed with the reason; a stop puts the problem being tuned back in the
// queue, where the next daemon resumes it (the candidates measured are in the database).
ServeSummary serve(const ServeOptions& options);

// "host:pid" of this process: who holds a claim.
std::string claimer_id();
// Whether the holder of a claim is gone: a dead process of this host, or a heartbeat older than
// stale_s (heartbeat < 0: none).
bool claim_is_gone(const std::string& claimer, double heartbeat, double stale_s);

}  // namespace gemmtune
