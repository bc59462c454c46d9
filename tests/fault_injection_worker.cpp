// gemmtune-fault-injection-worker: gemm-tune-worker with the fault-injection family registered,
// for tests/gpu_fault_isolation.cpp (selected there with GEMMTUNE_WORKER). Built beside the
// tests, never installed: installed workers cannot run the test family.
#include <iostream>

#include "cli_common.hpp"
#include "fault_injection_family.hpp"
#include "gemmtune/tuner/worker.hpp"

int main(int argc, char**) {
  if (argc > 1) {
    std::cerr << "gemmtune-fault-injection-worker is started by the tests and takes no arguments\n";
    return 2;
  }
  gemmtune::register_family(gemmtune::test::fault_injection_family());
  return gemmtune::cli::guarded_main("gemmtune-fault-injection-worker",
                                     [] { return gemmtune::run_worker(std::cin, std::cout); });
}
