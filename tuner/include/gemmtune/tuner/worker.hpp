#pragma once
// Fault isolation. Candidates are verified and timed in a worker process (gemm-tune-worker):
// a kernel that faults poisons only the worker's CUDA context, and one that hangs is killed by
// the tuner's watchdog. Either way the run records it and goes on with a fresh worker.
#include <sys/types.h>

#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>

namespace gemmtune {

// The worker's main loop: one JSON request per line on `in`, one answer per line on `out`.
// Returns the process exit code.
int run_worker(std::istream& in, std::ostream& out);

// Where gemm-tune-worker is: $GEMMTUNE_WORKER, beside the running program, beside
// libgemmtune, or on the PATH. Throws Error(io) when it is nowhere.
std::filesystem::path find_worker();

// The tuner's side of one worker process.
class WorkerClient {
 public:
  explicit WorkerClient(std::filesystem::path executable);
  ~WorkerClient();  // kills the worker if it is still running
  WorkerClient(const WorkerClient&) = delete;
  WorkerClient& operator=(const WorkerClient&) = delete;

  bool running() const { return pid_ > 0; }
  void start();
  // Sends one request line and waits up to timeout_s for one answer line. nullopt when the
  // worker timed out (it is killed) or died; failure() says which and shows its log's tail.
  std::optional<std::string> call(const std::string& request, double timeout_s);
  // Asks the worker to quit, then makes sure it is gone.
  void stop();
  const std::string& failure() const { return failure_; }

 private:
  void kill_now();
  std::string reap(bool killed);  // waits for the process; describes how it ended
  std::string log_tail() const;

  std::filesystem::path executable_;
  std::filesystem::path log_;
  pid_t pid_ = -1;
  int to_worker_ = -1, from_worker_ = -1;
  std::string buffer_;  // bytes read past the last answer line
  std::string failure_;
};

}  // namespace gemmtune
