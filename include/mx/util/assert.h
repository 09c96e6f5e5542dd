#pragma once

// MX_ASSERT guards programmer errors. It is active in the debug, relassert and tsan presets
// (MX_ENABLE_ASSERTS) and compiles to nothing otherwise, so it may sit on hot paths.

#include <cstdio>
#include <cstdlib>

namespace mx::detail {
[[noreturn]] inline void assert_failed(const char *expression, const char *why, const char *file,
                                       int line) noexcept {
    std::fprintf(stderr, "mxtasking: assertion failed: %s (%s) at %s:%d\n", why, expression, file, line);
    std::fflush(stderr);
    std::abort();
}
} // namespace mx::detail

#if defined(MX_ENABLE_ASSERTS)
#define MX_ASSERT(cond, why)                                                                                 \
    ((cond) ? static_cast<void>(0) : ::mx::detail::assert_failed(#cond, why, __FILE__, __LINE__))
#else
#define MX_ASSERT(cond, why) static_cast<void>(0)
#endif
