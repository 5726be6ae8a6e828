// Which sanitizer a test program runs under (GCC says so with a macro, clang
// with __has_feature), for tests that size their work or skip what a
// sanitizer cannot do.
#ifndef AXRT_TESTS_UNIT_SANITIZER_H_
#define AXRT_TESTS_UNIT_SANITIZER_H_

#if defined(__has_feature)
#define AXRT_TEST_HAS_FEATURE(f) __has_feature(f)
#else
#define AXRT_TEST_HAS_FEATURE(f) 0
#endif

namespace axrt_test {

#if defined(__SANITIZE_ADDRESS__) || AXRT_TEST_HAS_FEATURE(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif
#if defined(__SANITIZE_THREAD__) || AXRT_TEST_HAS_FEATURE(thread_sanitizer)
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = false;
#endif

}  // namespace axrt_test

#endif  // AXRT_TESTS_UNIT_SANITIZER_H_
