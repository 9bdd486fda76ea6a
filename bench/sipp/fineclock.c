/*
 * LD_PRELOAD shim for SIPp: SIPp reads its millisecond clock with
 * CLOCK_MONOTONIC_COARSE, which ticks at the kernel's HZ (4 ms at HZ=250), so its
 * response times come in 4 ms steps. This maps the coarse clocks to the precise
 * ones; SIPp then measures to the millisecond. Built by bench/run.mjs when a C
 * compiler is present; without it the report says the resolution is coarse.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <time.h>

int clock_gettime(clockid_t id, struct timespec *ts) {
  static int (*real)(clockid_t, struct timespec *);
  if (!real) real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
  if (id == CLOCK_MONOTONIC_COARSE) id = CLOCK_MONOTONIC;
  else if (id == CLOCK_REALTIME_COARSE) id = CLOCK_REALTIME;
  return real(id, ts);
}
