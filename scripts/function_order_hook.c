// The recorder of scripts/function_order.py, preloaded into a Python process whose
// dataecho extension was built with -finstrument-functions: every function entered is
// recorded once, in first-call order, and written as "object offset" lines to
// $FN_ORDER_OUT when the process exits.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#define CAP (1u << 20)
static void* table[CAP];
static void* order[CAP];
static unsigned n;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
__attribute__((no_instrument_function)) void __cyg_profile_func_enter(void* fn, void* site) {
  (void)site;
  uintptr_t h = ((uintptr_t)fn * 0x9E3779B97F4A7C15ull) >> 44;
  pthread_mutex_lock(&mu);
  for (;;) {
    h &= CAP - 1;
    if (table[h] == fn) break;
    if (!table[h]) {
      table[h] = fn;
      if (n < CAP) order[n++] = fn;
      break;
    }
    ++h;
  }
  pthread_mutex_unlock(&mu);
}
__attribute__((no_instrument_function)) void __cyg_profile_func_exit(void* fn, void* site) {
  (void)fn;
  (void)site;
}
__attribute__((no_instrument_function, destructor)) static void dump(void) {
  const char* p = getenv("FN_ORDER_OUT");
  if (!p) return;
  FILE* f = fopen(p, "w");
  if (!f) return;
  for (unsigned i = 0; i < n; ++i) {
    Dl_info info;
    if (dladdr(order[i], &info) && info.dli_fname)
      fprintf(f, "%s %lx\n", info.dli_fname,
              (unsigned long)((uintptr_t)order[i] - (uintptr_t)info.dli_fbase));
  }
  fclose(f);
}
