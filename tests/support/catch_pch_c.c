/* The C half of axrt_catch_pch (tests/support/CMakeLists.txt). */
int axrt_catch_pch_c;
