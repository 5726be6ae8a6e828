// The main() of the unit tests: Catch2's own session, nothing more.
#include "tests/support/catch_session.h"

int main(int argc, char** argv) { return axrt_test::run_catch_session(argc, argv); }
