#pragma once

// MX_ASAN is defined when AddressSanitizer instruments this translation unit (GCC or Clang);
// code that recycles memory itself poisons what it keeps, so ASan still reports accesses to it.

#if defined(__SANITIZE_ADDRESS__)
#define MX_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MX_ASAN 1
#endif
#endif
#if defined(MX_ASAN)
#include <sanitizer/asan_interface.h>
#endif
