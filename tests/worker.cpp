// gemmtune-test-worker: gemm-tune-worker with the families that exist only in tests: the
// fault-injection family (registered here) and the mixed-types family (which registers itself).
// Built beside the tests, never installed: installed workers cannot run test families. The tests
// select it with GEMMTUNE_WORKER.
#include "gemmtune/tuner/worker.hpp"

#include <iostream>

#include "cli_common.hpp"
#include "fault_injection_family.hpp"

int main(int argc, char**) {
  if (argc > 1) {
    std::cerr << "gemmtune-test-worker is started by the tests and takes no arguments\n";
    return 2;
  }
  gemmtune::register_family(gemmtune::test::fault_injection_family());
  return gemmtune::cli::guarded_main("gemmtune-test-worker",
                                     [] { return gemmtune::run_worker(std::cin, std::cout); });
}
