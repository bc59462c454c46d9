// The tuner's side of the worker process: spawn, one request and one answer at a time, and a
// watchdog that kills a worker which does not answer in time.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>

#include "gemmtune/generator/util.hpp"
#include "gemmtune/runtime/programs.hpp"
#include "gemmtune/tuner/worker.hpp"

extern char** environ;

namespace gemmtune {
namespace {

void write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(Errc::io, "the worker's input pipe closed");
    done += size_t(n);
  }
}

}  // namespace

std::filesystem::path find_worker() {
  return find_program("gemm-tune-worker", "GEMMTUNE_WORKER");
}

WorkerClient::WorkerClient(std::filesystem::path executable) : executable_(std::move(executable)) {}

WorkerClient::~WorkerClient() {
  if (running()) kill_now();
  std::error_code ec;
  if (!log_.empty()) std::filesystem::remove(log_, ec);
}

void WorkerClient::start() {
  // A worker that dies while we write must not take the tuner down with SIGPIPE.
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL)
    signal(SIGPIPE, SIG_IGN);
  int in_pipe[2], out_pipe[2];
  GT_REQUIRE(pipe2(in_pipe, O_CLOEXEC) == 0 && pipe2(out_pipe, O_CLOEXEC) == 0, Errc::io,
             "pipe failed: {}", std::strerror(errno));
  if (log_.empty()) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "gemmtune-worker-XXXXXX").string();
    const int fd = mkstemp(tmpl.data());
    GT_REQUIRE(fd >= 0, Errc::io, "cannot create the worker log: {}", std::strerror(errno));
    ::close(fd);
    log_ = tmpl;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log_.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  const std::string exe = executable_.string();
  char* argv[] = {const_cast<char*>(exe.c_str()), nullptr};
  const int rc = posix_spawn(&pid_, exe.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  if (rc != 0) {
    ::close(in_pipe[1]);
    ::close(out_pipe[0]);
    pid_ = -1;
    GT_THROW(Errc::io, "cannot start {}: {}", exe, std::strerror(rc));
  }
  to_worker_ = in_pipe[1];
  from_worker_ = out_pipe[0];
  buffer_.clear();
  failure_.clear();
}

std::optional<std::string> WorkerClient::call(const std::string& request, double timeout_s) {
  if (!running()) start();
  try {
    write_all(to_worker_, request + "\n");
  } catch (const Error&) {
    failure_ = "the worker exited before the request: " + reap(false);
    return std::nullopt;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    if (const size_t eol = buffer_.find('\n'); eol != std::string::npos) {
      std::string line = buffer_.substr(0, eol);
      buffer_.erase(0, eol + 1);
      return line;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      kill_now();
      failure_ = fmt::format("no answer within {:.0f} s: the worker was killed", timeout_s);
      return std::nullopt;
    }
    pollfd pfd{from_worker_, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, int(std::min<int64_t>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) GT_THROW(Errc::io, "poll failed: {}", std::strerror(errno));
    if (ready <= 0) continue;
    char chunk[65536];
    const ssize_t n = ::read(from_worker_, chunk, sizeof(chunk));
    if (n > 0) {
      buffer_.append(chunk, size_t(n));
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      failure_ = "the worker died: " + reap(false);
      return std::nullopt;
    }
  }
}

void WorkerClient::stop() {
  if (!running()) return;
  try {
    write_all(to_worker_, "{\"cmd\":\"quit\"}\n");
  } catch (const Error&) {
  }
  // Give it a moment to release the GPU cleanly, then make sure.
  for (int i = 0; i < 50 && running(); ++i) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      break;
    }
    ::usleep(100 * 1000);
  }
  if (running()) kill_now();
  if (to_worker_ >= 0) ::close(to_worker_);
  if (from_worker_ >= 0) ::close(from_worker_);
  to_worker_ = from_worker_ = -1;
}

void WorkerClient::kill_now() {
  if (pid_ > 0) ::kill(pid_, SIGKILL);
  reap(true);
}

std::string WorkerClient::reap(bool killed) {
  std::string how = "not running";
  if (pid_ > 0) {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    if (killed)
      how = "killed by the watchdog";
    else if (WIFSIGNALED(status))
      how = fmt::format("killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
      how = fmt::format("exit code {}", WEXITSTATUS(status));
    pid_ = -1;
  }
  if (to_worker_ >= 0) ::close(to_worker_);
  if (from_worker_ >= 0) ::close(from_worker_);
  to_worker_ = from_worker_ = -1;
  const std::string tail = log_tail();
  return tail.empty() ? how : how + "; its log ends: " + tail;
}

std::string WorkerClient::log_tail() const {
  std::ifstream in(log_);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!all.empty() && (all.back() == '\n' || all.back() == ' ')) all.pop_back();
  if (all.size() > 400) all = "..." + all.substr(all.size() - 400);
  for (char& c : all)
    if (c == '\n') c = ' ';
  return all;
}

}  // namespace gemmtune
