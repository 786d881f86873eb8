#include <hpvm.h>

void Leaf(float *a, size_t bytes_a) {
  __hpvm__hint(DEVICE)
  a[0] = 1.0f;
}
