// The program that carries the test programs' precompiled Catch2 header
// (tests/support/CMakeLists.txt); it is built, never run.
int main() { return 0; }
