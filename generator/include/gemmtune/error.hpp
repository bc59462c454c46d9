#pragma once
// The one exception type of gemmtune. Every failure that reaches a user is a gemmtune::Error
// with a code (for the C API and for scripts) and a message that says what to do.
#include <stdexcept>
#include <string>

namespace gemmtune {

enum class Errc {
  invalid_argument,  // bad input from the caller: M/N/K <= 0, ld < rows, null pointer, bad option
  unsupported,       // valid input that this build or GPU cannot serve (dtype, architecture)
  no_device,         // no CUDA driver or no GPU
  cuda,              // a CUDA driver call failed
  compile,           // NVRTC rejected a kernel (the log and options are in the message)
  database,          // SQLite failed or the database file is not ours
  io,                // a file could not be read or written
  timeout,           // a kernel did not finish in time
  internal,          // a bug in gemmtune
};

const char* errc_name(Errc code) noexcept;

class Error : public std::runtime_error {
 public:
  Error(Errc code, const std::string& message) : std::runtime_error(message), code_(code) {}
  Errc code() const noexcept { return code_; }

 private:
  Errc code_;
};

}  // namespace gemmtune
