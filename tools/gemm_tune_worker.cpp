// gemm-tune-worker: the process in which gemm-tune verifies and times candidates, so that a
// kernel that faults or hangs takes down only this process. Not meant to be run by hand:
// it reads JSON requests on stdin (tuner/src/protocol.hpp).
#include <iostream>

#include "cli_common.hpp"
#include "gemmtune/tuner/worker.hpp"

int main(int argc, char**) {
  if (argc > 1) {
    std::cerr << "gemm-tune-worker is started by gemm-tune and takes no arguments\n";
    return 2;
  }
  return gemmtune::cli::guarded_main("gemm-tune-worker",
                                     [] { return gemmtune::run_worker(std::cin, std::cout); });
}
