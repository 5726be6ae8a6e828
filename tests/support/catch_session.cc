// Catch2's implementation, compiled once per build tree for every test
// program; each program's main() is catch_main.cc or its own (the
// conformance suite's cts_main.cc).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "tests/support/catch_session.h"

namespace axrt_test {

int run_catch_session(int argc, char** argv) { return Catch::Session().run(argc, argv); }

}  // namespace axrt_test
