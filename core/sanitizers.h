// Whether AddressSanitizer instruments this build: GCC says so with
// __SANITIZE_ADDRESS__, Clang with __has_feature(address_sanitizer). For code
// that keeps memory of its own and must let the sanitizer see its uses (the
// frame block cache, the buffer pool's page arena), and for tests whose
// memory figures the sanitizer's shadow and quarantine would distort.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define PAGEFILE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PAGEFILE_ASAN 1
#endif
#endif
#ifndef PAGEFILE_ASAN
#define PAGEFILE_ASAN 0
#endif

namespace pagefile {

inline constexpr bool kAddressSanitizer = PAGEFILE_ASAN != 0;

}  // namespace pagefile
