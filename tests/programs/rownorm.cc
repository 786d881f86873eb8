// rownorm.cc -- C++ written the common way: each row scaled to unit length with std::sqrt (a
// call in <cmath> whose result guards the reads: `s > 0 ? x / s : 0`), a helper template in a
// namespace, a lambda capturing the row by reference (so at -O0 the parameters stay in their
// stack slots), std::vector storage, a packed argument struct and a launch through a template.
//
//   Root (CPU) -> Norm (leaf, one instance per row; a loop over the row's M columns)
//
// Usage: rownorm [N [M]]   (defaults 1000 37). Prints a checksum; exit 0 PASS.
#include <hpvm.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "check.h"

namespace detail {
template <typename T> static inline T squared(T v) { return v * v; }
}  // namespace detail

void Norm(float *__restrict__ in, size_t bytes_in, float *__restrict__ out, size_t bytes_out, long m) {
  __hpvm__hint(hpvm::DEVICE);
  __hpvm__attributes(1, in, 1, out);
  long r = __hpvm__getNodeInstanceID_x(__hpvm__getNode());
  auto cell = [&](long c) { return in[r * m + c]; };
  float s = 0.0f;
  for (long c = 0; c < m; ++c) {
    s += detail::squared(cell(c));
  }
  s = std::sqrt(s);
  for (long c = 0; c < m; ++c) {
    out[r * m + c] = s > 0.0f ? cell(c) / s : 0.0f;
  }
  __hpvm__return(0);
}

void Root(float *in, size_t bytes_in, float *out, size_t bytes_out, long m, long n) {
  __hpvm__hint(hpvm::CPU_TARGET);
  __hpvm__attributes(1, in, 1, out);
  void *node = __hpvm__createNodeND(1, Norm, n);
  __hpvm__bindIn(node, 0, 0, 0);
  __hpvm__bindIn(node, 1, 1, 0);
  __hpvm__bindIn(node, 2, 2, 0);
  __hpvm__bindIn(node, 3, 3, 0);
  __hpvm__bindIn(node, 4, 4, 0);
}

struct __attribute__((__packed__)) Args {
  float *in;
  size_t bytes_in;
  float *out;
  size_t bytes_out;
  long m, n;
};

template <typename Graph> static void run(Graph root, Args &args) {
  void *g = __hpvm__launch(0, root, &args);
  __hpvm__wait(g);
}

int main(int argc, char **argv) {
  long n = argc > 1 ? std::atol(argv[1]) : 1000, m = argc > 2 ? std::atol(argv[2]) : 37;
  if (n < 1 || m < 1 || argc > 3) {
    std::fprintf(stderr, "usage: %s [N [M]]\n", argv[0]);
    return 2;
  }
  std::vector<float> in(n * m), out(n * m);
  for (long i = 0; i < n * m; ++i) {
    // Every 7th row is zero: the guard's other way.
    in[i] = (i / m) % 7 == 3 ? 0.0f : static_cast<float>(i % 13) - 6.0f;
  }
  size_t bytes = in.size() * sizeof(float);
  __hpvm__init();
  llvm_hpvm_track_mem(in.data(), bytes);
  llvm_hpvm_track_mem(out.data(), bytes);
  Args args{in.data(), bytes, out.data(), bytes, m, n};
  run(Root, args);
  llvm_hpvm_request_mem(out.data(), bytes);
  long bad = 0;
  for (long r = 0; r < n; ++r) {
    float s = 0.0f;
    for (long c = 0; c < m; ++c) {
      s += in[r * m + c] * in[r * m + c];
    }
    s = std::sqrt(s);
    for (long c = 0; c < m; ++c) {
      bad += out[r * m + c] != (s > 0.0f ? in[r * m + c] / s : 0.0f);
    }
  }
  std::printf("checksum %016llx\n", fnv1a(out.data(), bytes));
  __hpvm__cleanup();
  std::printf("rownorm %ldx%ld: %s (%ld wrong)\n", n, m, bad ? "FAIL" : "PASS", bad);
  return bad ? 1 : 0;
}
