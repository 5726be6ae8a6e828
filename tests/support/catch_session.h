// Runs Catch2's session over the tests linked into the program: what a
// main() calls (Catch2 declares its Session only where it is implemented,
// which is catch_session.cc, compiled once).
#ifndef AXRT_TESTS_SUPPORT_CATCH_SESSION_H_
#define AXRT_TESTS_SUPPORT_CATCH_SESSION_H_

namespace axrt_test {

int run_catch_session(int argc, char** argv);

}  // namespace axrt_test

#endif  // AXRT_TESTS_SUPPORT_CATCH_SESSION_H_
