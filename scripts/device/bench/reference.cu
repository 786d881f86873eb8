// Hand-written CUDA C++ versions of the four benchmarked examples, compiled with nvcc -O3 on
// the GPU machine: the same algorithms, block shapes and index types as the HPVM-C sources
// in examples/ (so the comparison is of compilers and runtimes, not of algorithms).
//
//   reference matmul N | stencil2d W H | nbody N | sgemm_tiled M N K
//
// Prints one JSON object: the kernel's median and minimum time over 11 runs after 3 warm-up
// runs, timed with CUDA events.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(x)                                                                                   \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));                 \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

__global__ void matmul(const float *A, const float *B, float *C, long N) {
  long x = (long)blockIdx.x * blockDim.x + threadIdx.x;
  long y = (long)blockIdx.y * blockDim.y + threadIdx.y;
  long row = y, col = x;
  if (row < N && col < N) {
    float acc = 0.0f;
    for (long k = 0; k < N; ++k)
      acc += A[row * N + k] * B[k * N + col];
    C[row * N + col] = acc;
  }
}

__global__ void stencil(const float *in, float *out, long w, long h) {
  long x = (long)blockIdx.x * blockDim.x + threadIdx.x;
  long y = (long)blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h) {
    long id = y * w + x;
    if (x > 0 && y > 0 && x < w - 1 && y < h - 1) {
      float res = in[id - w];
      res += in[id + w];
      res += in[id - 1];
      res += in[id + 1];
      res += -4.0f * in[id];
      res *= 0.24f;
      res += in[id];
      res = res > 127.0f ? 127.0f : res;
      res = res < 0.0f ? 0.0f : res;
      out[id] = res;
    } else {
      out[id] = in[id];
    }
  }
}

__global__ void velocity(const float *px, const float *py, const float *pz, const float *mass,
                         float *vx, float *vy, float *vz, float dt, float eps2, long n) {
  long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float xi = px[i], yi = py[i], zi = pz[i];
    float ax = 0.0f, ay = 0.0f, az = 0.0f;
    for (long j = 0; j < n; ++j) {
      float dx = px[j] - xi, dy = py[j] - yi, dz = pz[j] - zi;
      float d2 = dx * dx;
      d2 += dy * dy;
      d2 += dz * dz;
      d2 += eps2;
      float inv = 1.0f / sqrtf(d2);
      float s = mass[j] * inv;
      s *= inv;
      s *= inv;
      ax += s * dx;
      ay += s * dy;
      az += s * dz;
    }
    vx[i] += ax * dt;
    vy[i] += ay * dt;
    vz[i] += az * dt;
  }
}

#define TILE 16
__global__ void sgemm(const float *A, const float *B, float *C, long m, long n, long k, float alpha,
                      float beta) {
  __shared__ float tileA[TILE * TILE];
  __shared__ float tileB[TILE * TILE];
  long tx = threadIdx.x, ty = threadIdx.y, bx = blockIdx.x, by = blockIdx.y;
  long col = bx * TILE + tx, row = by * TILE + ty;
  float acc = 0.0f;
  long numTiles = k / TILE;
  for (long t = 0; t < numTiles; ++t) {
    long kt = t * TILE;
    tileA[ty * TILE + tx] = A[row * k + kt + tx];
    tileB[ty * TILE + tx] = B[(kt + ty) * n + col];
    __syncthreads();
    for (long kk = 0; kk < TILE; ++kk)
      acc += tileA[ty * TILE + kk] * tileB[kk * TILE + tx];
    __syncthreads();
  }
  if (row < m && col < n)
    C[row * n + col] = alpha * acc + beta * C[row * n + col];
}

static float *device_random(size_t count, unsigned seed) {
  std::vector<float> h(count);
  for (size_t i = 0; i < count; ++i) {
    seed = seed * 1664525u + 1013904223u;
    h[i] = (float)(seed >> 8) / 16777216.0f;
  }
  float *d;
  CHECK(cudaMalloc(&d, count * sizeof(float)));
  CHECK(cudaMemcpy(d, h.data(), count * sizeof(float), cudaMemcpyHostToDevice));
  return d;
}

template <typename F> static void time_it(const char *name, const char *size, F launch) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i)
    launch();
  CHECK(cudaDeviceSynchronize());
  std::vector<float> ms;
  for (int i = 0; i < 11; ++i) {
    CHECK(cudaEventRecord(a));
    launch();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    CHECK(cudaGetLastError());
    float t;
    CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  printf("{\"bench\":\"%s\",\"size\":\"%s\",\"compiler\":\"nvcc -O3\",\"median_ms\":%.5f,\"min_ms\":%.5f,\"runs\":11}\n",
         name, size, ms[5], ms[0]);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: reference matmul N | stencil2d W H | nbody N | sgemm_tiled M N K\n");
    return 2;
  }
  char size[128] = "";
  for (int i = 2; i < argc; ++i) {
    strcat(size, argv[i]);
    if (i + 1 < argc)
      strcat(size, " ");
  }
  if (!strcmp(argv[1], "matmul")) {
    long N = atol(argv[2]);
    float *A = device_random(N * N, 1), *B = device_random(N * N, 2), *C = device_random(N * N, 3);
    dim3 block(16, 16), grid(N / 16, N / 16);
    time_it("matmul", size, [&] { matmul<<<grid, block>>>(A, B, C, N); });
  } else if (!strcmp(argv[1], "stencil2d")) {
    long w = atol(argv[2]), h = atol(argv[3]);
    float *in = device_random(w * h, 1), *out = device_random(w * h, 2);
    dim3 block(16, 16), grid(w / 16, h / 16);
    time_it("stencil2d", size, [&] { stencil<<<grid, block>>>(in, out, w, h); });
  } else if (!strcmp(argv[1], "nbody")) {
    long n = atol(argv[2]);
    float *px = device_random(n, 1), *py = device_random(n, 2), *pz = device_random(n, 3);
    float *mass = device_random(n, 4), *vx = device_random(n, 5), *vy = device_random(n, 6),
          *vz = device_random(n, 7);
    time_it("nbody", size, [&] {
      velocity<<<(n + 255) / 256, 256>>>(px, py, pz, mass, vx, vy, vz, 0.01f, 0.0025f, n);
    });
  } else if (!strcmp(argv[1], "sgemm_tiled")) {
    long m = atol(argv[2]), n = atol(argv[3]), k = atol(argv[4]);
    float *A = device_random(m * k, 1), *B = device_random(k * n, 2), *C = device_random(m * n, 3);
    dim3 block(TILE, TILE), grid(n / TILE, m / TILE);
    time_it("sgemm_tiled", size, [&] { sgemm<<<grid, block>>>(A, B, C, m, n, k, 1.5f, 0.5f); });
  } else {
    fprintf(stderr, "unknown benchmark %s\n", argv[1]);
    return 2;
  }
  return 0;
}
