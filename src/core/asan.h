// Marks memory that our own allocators (the block cache, the PNG decode scratch) hand
// out and take back, so that AddressSanitizer reports a use after release there as it
// does for malloc's memory. No-ops in other builds.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define DATAECHO_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define DATAECHO_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define DATAECHO_POISON(p, n) ((void)(p), (void)(n))
#define DATAECHO_UNPOISON(p, n) ((void)(p), (void)(n))
#endif
