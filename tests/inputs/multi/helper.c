/* Plain C: compiled without the HPVM pipeline. */
#include "helper.h"

void fill_squares(float *a, long n) {
  for (long i = 0; i < n; ++i)
    a[i] = (float)(i * i);
}

long count_wrong(const float *a, long n, float factor) {
  long bad = 0;
  for (long i = 0; i < n; ++i)
    bad += a[i] != (float)i * factor;
  return bad;
}
