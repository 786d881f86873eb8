// A C++ program: node functions get mangled symbols (_Z5ScalePfml...), which every report
// must show by their C++ names.
#include <hpvm.h>
#include <stdlib.h>

namespace kernels {
void Scale(float *v, size_t bytes_v, long n) {
  __hpvm__hint(hpvm::DEVICE);
  __hpvm__attributes(1, v, 1, v);
  long i = __hpvm__getNodeInstanceID_x(__hpvm__getNode());
  if (i < n) v[i] = 2.0f * v[i];
  __hpvm__return(0);
}
} // namespace kernels

void Root(float *v, size_t bytes_v, long n) {
  __hpvm__hint(hpvm::CPU_TARGET);
  __hpvm__attributes(1, v, 1, v);
  void *s = __hpvm__createNodeND(1, kernels::Scale, n);
  __hpvm__bindIn(s, 0, 0, 0);
  __hpvm__bindIn(s, 1, 1, 0);
  __hpvm__bindIn(s, 2, 2, 0);
}

struct __attribute__((__packed__)) In {
  float *v;
  size_t bytes_v;
  long n;
};

int main() {
  long n = 100;
  float *v = static_cast<float *>(malloc(n * sizeof(float)));
  for (long i = 0; i < n; ++i) v[i] = (float)i;
  __hpvm__init();
  llvm_hpvm_track_mem(v, n * sizeof(float));
  In args = {v, n * sizeof(float), n};
  void *g = __hpvm__launch(0, Root, &args);
  __hpvm__wait(g);
  llvm_hpvm_request_mem(v, n * sizeof(float));
  __hpvm__cleanup();
  return v[3] == 6.0f ? 0 : 1;
}
