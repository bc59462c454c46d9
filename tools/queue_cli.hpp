#pragma once
// gemm-tune --serve and --status: the tuning daemon and its queue, for people and scripts.
#include <filesystem>

#include "gemmtune/tuner/serve.hpp"

namespace gemmtune::cli {

// Serves the queue until SIGINT or SIGTERM (or, with once, until it is empty); 130 when stopped.
int serve_queue(ServeOptions options);
// Prints the queue of the database: a table, or JSON.
int show_queue(const std::filesystem::path& db, bool as_json);

}  // namespace gemmtune::cli
