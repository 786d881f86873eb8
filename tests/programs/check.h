/* check.h -- what the test programs share: the FNV-1a hash of a result's bytes, printed as
 * `checksum XXXX` so runs on different devices can be compared bit for bit. */
#ifndef TEST_PROGRAMS_CHECK_H
#define TEST_PROGRAMS_CHECK_H
#include <stddef.h>

static unsigned long long fnv1a(const void *data, size_t n) {
  unsigned long long h = 14695981039346656037ULL;
  const unsigned char *p = (const unsigned char *)data;
  for (size_t i = 0; i < n; ++i) {
    h = (h ^ p[i]) * 1099511628211ULL;
  }
  return h;
}

#endif
