#pragma once
// A family that misbehaves on purpose, for tests of fault isolation. It lives only in test
// binaries (and the test worker beside them): the library and the installed tools do not have it,
// so no tuning database can make them run it.
#include "gemmtune/generator/family.hpp"

namespace gemmtune::test {

// MODE 1 writes to an invalid address, MODE 2 never finishes. Register it with
// register_family() to make find_family() (and so the tuner and its worker) find it; it supports
// no problem, so it is measured only as an extra candidate (TuneOptions::extra).
const Family& fault_injection_family();

}  // namespace gemmtune::test
