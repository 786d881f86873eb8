/*
 * textures.cu -- CUDA arrays and texture objects as programs use them: a 2-D float array
 * sampled at texel centres and outside it (clamp), the same array filtered linearly with
 * normalized, wrapping coordinates; a uchar4 array read as normalized floats with a border;
 * tex1Dfetch over linear memory (ints, reading zero past the end); a 3-D array filled by
 * cudaMemcpy3D; pitched linear memory as a 2-D texture; signed 16-bit texels read
 * normalized; half-precision texels; a layered array; cube maps, one and two to an array,
 * fetched at their texels' directions (at two lengths) and by arbitrary directions (whose
 * face is checked); a surface written and read (its
 * boundary modes); copies back out of an array; the descriptions asked
 * back; and the errors of bad formats. Checked against the host: exactly where a texel is
 * read whole, within 1/256 of the range where texels are filtered (the texture unit holds
 * the weights in fixed point).
 * Usage: textures [W [H]]   (default 37 23)
 * Prints `checksum <hex>` of the exact results, then PASS or FAIL.
 */
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda_fp16.h>
#include <vector>

/* A float's bits (memcpy: reading a float through an integer pointer is undefined). */
static uint32_t bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

#define CHECK(call)                                                                          \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));            \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

__global__ void sample2d(cudaTextureObject_t point, cudaTextureObject_t linear, float *exact, float *filtered,
                         int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= w + 4 || y >= h + 4)
    return;
  int i = y * (w + 4) + x;
  // Two texels outside on each side: clamped.
  exact[i] = tex2D<float>(point, x - 2 + 0.5f, y - 2 + 0.5f);
  filtered[i] = tex2D<float>(linear, (x - 2 + 0.25f) / w, (y - 2 + 0.75f) / h);
}

__global__ void others(cudaTextureObject_t rgba, cudaTextureObject_t ints, cudaTextureObject_t cube,
                       cudaTextureObject_t pitched, cudaTextureObject_t shorts, cudaTextureObject_t halves,
                       float4 *colors, int *fetched, float *volume, float *rows, float *normalized,
                       float *widened, int w, int h, int d) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (y == 0 && x < w + 8)
    fetched[x] = tex1Dfetch<int>(ints, x - 4);
  if (x < w + 2 && y < h + 2)
    colors[y * (w + 2) + x] = tex2D<float4>(rgba, x - 1 + 0.5f, y - 1 + 0.5f);
  if (x < w && y < h) {
    rows[y * w + x] = tex2D<float>(pitched, x + 0.5f, y + 0.5f);
    normalized[y * w + x] = tex2D<float>(shorts, x + 0.5f, y + 0.5f);
    widened[y * w + x] = tex2D<float>(halves, x + 0.5f, y + 0.5f);
    for (int z = 0; z < d; ++z)
      volume[(z * h + y) * w + x] = tex3D<float>(cube, x + 0.5f, y + 0.5f, z + 0.5f);
  }
}

__global__ void layers(cudaTextureObject_t layered, float *out, int w, int h, int d) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h)
    for (int z = 0; z < d + 1; ++z) // one layer past the last: clamped
      out[(z * h + y) * w + x] = tex2DLayered<float>(layered, x + 0.5f, y + 0.5f, z);
}

// Surfaces: one element written per thread (those outside dropped), then a neighbour read,
// clamped at the edge.
// Cube maps of CW x CW faces: `exact` gets, per face f and texel (x, y), the texel fetched at
// the direction of its centre (CUDA's table inverted), at length 1 and 3.5, and from the
// second cube of `cubes`; `faces` gets the fetch at arbitrary directions `dirs`.
__global__ void cubemaps(cudaTextureObject_t cube, cudaTextureObject_t cubes, float *exact, const float3 *dirs,
                         float *faces, int cw, int ndirs) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < cw && y < cw)
    for (int f = 0; f < 6; ++f) {
      float s = (x + 0.5f) / cw * 2.0f - 1.0f, t = (y + 0.5f) / cw * 2.0f - 1.0f;
      float3 d = f == 0   ? make_float3(1, -t, -s)
                 : f == 1 ? make_float3(-1, -t, s)
                 : f == 2 ? make_float3(s, 1, t)
                 : f == 3 ? make_float3(s, -1, -t)
                 : f == 4 ? make_float3(s, -t, 1)
                          : make_float3(-s, -t, -1);
      int i = (f * cw + y) * cw + x;
      exact[3 * i] = texCubemap<float>(cube, d.x, d.y, d.z);
      exact[3 * i + 1] = texCubemap<float>(cube, 3.5f * d.x, 3.5f * d.y, 3.5f * d.z);
      exact[3 * i + 2] = texCubemapLayered<float>(cubes, d.x, d.y, d.z, 1);
    }
  int k = y * cw + x;
  if (k < ndirs)
    faces[k] = texCubemap<float>(cube, dirs[k].x, dirs[k].y, dirs[k].z);
}

__global__ void paint(cudaSurfaceObject_t s, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w + 2 && y < h)
    surf2Dwrite((float)(x * 1000 + y), s, (x - 1) * (int)sizeof(float), y, cudaBoundaryModeZero);
}

__global__ void look(cudaSurfaceObject_t s, float *seen, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < w && y < h)
    seen[y * w + x] = surf2Dread<float>(s, (x + 1) * (int)sizeof(float), y, cudaBoundaryModeClamp);
}

static float texel(const std::vector<float> &t, int w, int h, int x, int y) {
  x = x < 0 ? 0 : x >= w ? w - 1 : x;
  y = y < 0 ? 0 : y >= h ? h - 1 : y;
  return t[y * w + x];
}

static cudaTextureObject_t make(cudaResourceDesc r, cudaTextureAddressMode address, cudaTextureFilterMode filter,
                                cudaTextureReadMode read, int normalized) {
  cudaTextureDesc t = {};
  t.addressMode[0] = t.addressMode[1] = t.addressMode[2] = address;
  t.filterMode = filter;
  t.readMode = read;
  t.normalizedCoords = normalized;
  cudaTextureObject_t o;
  CHECK(cudaCreateTextureObject(&o, &r, &t, nullptr));
  return o;
}

static cudaResourceDesc of_array(cudaArray_t a) {
  cudaResourceDesc r = {};
  r.resType = cudaResourceTypeArray;
  r.res.array.array = a;
  return r;
}

int main(int argc, char **argv) {
  int w = argc > 1 ? atoi(argv[1]) : 37, h = argc > 2 ? atoi(argv[2]) : 23, d = 3;
  if (w < 2 || h < 2) {
    fprintf(stderr, "usage: textures [W >= 2 [H >= 2]]\n");
    return 2;
  }
  bool ok = true;
  uint64_t sum = 1469598103934665603ull;
  auto mix = [&](uint32_t v) { sum = (sum ^ v) * 1099511628211ull; };

  // A 2-D float array, point-sampled (clamp) and filtered (wrap, normalized coordinates).
  std::vector<float> img(w * h);
  for (int i = 0; i < w * h; ++i)
    img[i] = (float)(((long long)i * 7919) % 1000) / 8.0f;
  cudaChannelFormatDesc fd = cudaCreateChannelDesc<float>();
  cudaArray_t arr;
  CHECK(cudaMallocArray(&arr, &fd, w, h));
  CHECK(cudaMemcpy2DToArray(arr, 0, 0, img.data(), w * sizeof(float), w * sizeof(float), h, cudaMemcpyHostToDevice));
  cudaTextureObject_t point = make(of_array(arr), cudaAddressModeClamp, cudaFilterModePoint, cudaReadModeElementType, 0);
  cudaTextureObject_t linear = make(of_array(arr), cudaAddressModeWrap, cudaFilterModeLinear, cudaReadModeElementType, 1);
  int ew = w + 4, eh = h + 4;
  float *exact, *filtered;
  CHECK(cudaMalloc(&exact, ew * eh * sizeof(float)));
  CHECK(cudaMalloc(&filtered, ew * eh * sizeof(float)));
  dim3 block(16, 8), grid((ew + 15) / 16, (eh + 7) / 8);
  sample2d<<<grid, block>>>(point, linear, exact, filtered, w, h);
  CHECK(cudaGetLastError());
  std::vector<float> he(ew * eh), hf(ew * eh);
  CHECK(cudaMemcpy(he.data(), exact, he.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hf.data(), filtered, hf.size() * sizeof(float), cudaMemcpyDeviceToHost));
  float worst = 0;
  for (int y = 0; y < eh; ++y)
    for (int x = 0; x < ew; ++x) {
      float want = texel(img, w, h, x - 2, y - 2), got = he[y * ew + x];
      ok &= got == want;
      mix(bits(got));
      // Wrapped, filtered: texels at (x - 2 + 0.25 - 0.5) and (y - 2 + 0.75 - 0.5).
      float u = (x - 2 + 0.25f) / w, v = (y - 2 + 0.75f) / h;
      u = (u - floorf(u)) * w - 0.5f, v = (v - floorf(v)) * h - 0.5f;
      int i0 = (int)floorf(u), j0 = (int)floorf(v);
      float a = u - floorf(u), b = v - floorf(v);
      auto wrap = [](int i, int n) { return ((i % n) + n) % n; };
      auto at = [&](int i, int j) { return img[wrap(j, h) * w + wrap(i, w)]; };
      float ref = (1 - a) * (1 - b) * at(i0, j0) + a * (1 - b) * at(i0 + 1, j0) + (1 - a) * b * at(i0, j0 + 1) +
                  a * b * at(i0 + 1, j0 + 1);
      float err = fabsf(hf[y * ew + x] - ref);
      worst = err > worst ? err : worst;
    }
  ok &= worst <= 125.0f / 256.0f;

  // uchar4 texels read as normalized floats, with a zero border.
  std::vector<uchar4> rgba(w * h);
  for (int i = 0; i < w * h; ++i)
    rgba[i] = make_uchar4(i % 256, (i * 3) % 256, 255 - i % 256, (i * 11) % 256);
  cudaChannelFormatDesc cd = cudaCreateChannelDesc<uchar4>();
  cudaArray_t carr;
  CHECK(cudaMallocArray(&carr, &cd, w, h));
  CHECK(cudaMemcpy2DToArray(carr, 0, 0, rgba.data(), w * sizeof(uchar4), w * sizeof(uchar4), h, cudaMemcpyHostToDevice));
  cudaTextureObject_t colorTex =
      make(of_array(carr), cudaAddressModeBorder, cudaFilterModePoint, cudaReadModeNormalizedFloat, 0);

  // Ints in linear memory, fetched by index.
  std::vector<int> ints(w);
  for (int i = 0; i < w; ++i)
    ints[i] = i * i - 7;
  int *dints;
  CHECK(cudaMalloc(&dints, w * sizeof(int)));
  CHECK(cudaMemcpy(dints, ints.data(), w * sizeof(int), cudaMemcpyHostToDevice));
  cudaResourceDesc lr = {};
  lr.resType = cudaResourceTypeLinear;
  lr.res.linear.devPtr = dints;
  lr.res.linear.desc = cudaCreateChannelDesc<int>();
  lr.res.linear.sizeInBytes = w * sizeof(int);
  cudaTextureObject_t intTex = make(lr, cudaAddressModeClamp, cudaFilterModePoint, cudaReadModeElementType, 0);

  // A 3-D array by cudaMemcpy3D.
  std::vector<float> vol(w * h * d);
  for (int i = 0; i < w * h * d; ++i)
    vol[i] = (float)(i % 977) - 300.0f;
  cudaArray_t varr;
  CHECK(cudaMalloc3DArray(&varr, &fd, make_cudaExtent(w, h, d)));
  cudaMemcpy3DParms p = {};
  p.srcPtr = make_cudaPitchedPtr(vol.data(), w * sizeof(float), w, h);
  p.dstArray = varr;
  p.extent = make_cudaExtent(w, h, d);
  p.kind = cudaMemcpyHostToDevice;
  CHECK(cudaMemcpy3D(&p));
  cudaTextureObject_t volTex = make(of_array(varr), cudaAddressModeClamp, cudaFilterModePoint, cudaReadModeElementType, 0);

  // Pitched linear memory as a 2-D texture.
  float *pitchedRows;
  size_t pitch;
  CHECK(cudaMallocPitch((void **)&pitchedRows, &pitch, w * sizeof(float), h));
  CHECK(cudaMemcpy2D(pitchedRows, pitch, img.data(), w * sizeof(float), w * sizeof(float), h, cudaMemcpyHostToDevice));
  cudaResourceDesc pr = {};
  pr.resType = cudaResourceTypePitch2D;
  pr.res.pitch2D.devPtr = pitchedRows;
  pr.res.pitch2D.desc = fd;
  pr.res.pitch2D.width = w;
  pr.res.pitch2D.height = h;
  pr.res.pitch2D.pitchInBytes = pitch;
  cudaTextureObject_t pitchTex = make(pr, cudaAddressModeClamp, cudaFilterModePoint, cudaReadModeElementType, 0);

  // Signed 16-bit texels read normalized; half-precision texels.
  std::vector<short> shorts(w * h);
  std::vector<__half> halves(w * h);
  for (int i = 0; i < w * h; ++i) {
    shorts[i] = (short)(((long long)i * 977) % 65536 - 32768);
    halves[i] = __float2half((float)(i % 200) / 16.0f - 3.0f);
  }
  cudaChannelFormatDesc sd = cudaCreateChannelDesc<short>(), hd = cudaCreateChannelDescHalf();
  cudaArray_t sarr, harr;
  CHECK(cudaMallocArray(&sarr, &sd, w, h));
  CHECK(cudaMallocArray(&harr, &hd, w, h));
  CHECK(cudaMemcpy2DToArray(sarr, 0, 0, shorts.data(), w * 2, w * 2, h, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy2DToArray(harr, 0, 0, halves.data(), w * 2, w * 2, h, cudaMemcpyHostToDevice));
  cudaTextureObject_t shortTex =
      make(of_array(sarr), cudaAddressModeClamp, cudaFilterModePoint, cudaReadModeNormalizedFloat, 0);
  cudaTextureObject_t halfTex = make(of_array(harr), cudaAddressModeClamp, cudaFilterModePoint, cudaReadModeElementType, 0);

  float4 *colors;
  int *fetched;
  float *volume, *rows, *normalized, *widened;
  CHECK(cudaMalloc(&colors, (w + 2) * (h + 2) * sizeof(float4)));
  CHECK(cudaMalloc(&fetched, (w + 8) * sizeof(int)));
  CHECK(cudaMalloc(&volume, w * h * d * sizeof(float)));
  CHECK(cudaMalloc(&rows, w * h * sizeof(float)));
  CHECK(cudaMalloc(&normalized, w * h * sizeof(float)));
  CHECK(cudaMalloc(&widened, w * h * sizeof(float)));
  dim3 grid2((w + 8 + 15) / 16, (h + 2 + 7) / 8);
  others<<<grid2, block>>>(colorTex, intTex, volTex, pitchTex, shortTex, halfTex, colors, fetched, volume, rows,
                           normalized, widened, w, h, d);
  CHECK(cudaGetLastError());
  std::vector<float4> hc((w + 2) * (h + 2));
  std::vector<int> hfetch(w + 8);
  std::vector<float> hv(w * h * d), hr(w * h), hn(w * h), hw(w * h);
  CHECK(cudaMemcpy(hc.data(), colors, hc.size() * sizeof(float4), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hfetch.data(), fetched, hfetch.size() * sizeof(int), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hv.data(), volume, hv.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hr.data(), rows, hr.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hn.data(), normalized, hn.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hw.data(), widened, hw.size() * sizeof(float), cudaMemcpyDeviceToHost));
  for (int y = 0; y < h + 2; ++y)
    for (int x = 0; x < w + 2; ++x) {
      float4 got = hc[y * (w + 2) + x];
      bool inside = x >= 1 && y >= 1 && x <= w && y <= h;
      uchar4 t = inside ? rgba[(y - 1) * w + x - 1] : make_uchar4(0, 0, 0, 0);
      float want[4] = {t.x / 255.0f, t.y / 255.0f, t.z / 255.0f, t.w / 255.0f};
      float have[4] = {got.x, got.y, got.z, got.w};
      for (int c = 0; c < 4; ++c) {
        ok &= fabsf(have[c] - want[c]) <= 1e-6f;
        mix((uint32_t)lrintf(have[c] * 255.0f));
      }
    }
  for (int x = 0; x < w + 8; ++x) {
    int i = x - 4, want = i >= 0 && i < w ? ints[i] : 0;
    ok &= hfetch[x] == want;
    mix((uint32_t)hfetch[x]);
  }
  for (int i = 0; i < w * h * d; ++i) {
    ok &= hv[i] == vol[i];
    mix(bits(hv[i]));
  }
  for (int i = 0; i < w * h; ++i) {
    float n = shorts[i] / 32767.0f;
    n = n < -1.0f ? -1.0f : n;
    ok &= hr[i] == img[i] && fabsf(hn[i] - n) <= 1e-6f && hw[i] == __half2float(halves[i]);
    mix(bits(hr[i]));
    mix((uint32_t)lrintf(hn[i] * 32767.0f));
    mix(bits(hw[i]));
  }

  // The same volume as a layered 2-D array.
  cudaArray_t larr;
  CHECK(cudaMalloc3DArray(&larr, &fd, make_cudaExtent(w, h, d), cudaArrayLayered));
  p.dstArray = larr;
  CHECK(cudaMemcpy3D(&p));
  cudaTextureObject_t layerTex =
      make(of_array(larr), cudaAddressModeClamp, cudaFilterModePoint, cudaReadModeElementType, 0);
  float *layered;
  CHECK(cudaMalloc(&layered, w * h * (d + 1) * sizeof(float)));
  layers<<<dim3((w + 15) / 16, (h + 7) / 8), block>>>(layerTex, layered, w, h, d);
  CHECK(cudaGetLastError());
  std::vector<float> hl(w * h * (d + 1));
  CHECK(cudaMemcpy(hl.data(), layered, hl.size() * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < w * h * (d + 1); ++i) {
    int z = i / (w * h) < d ? i / (w * h) : d - 1;
    ok &= hl[i] == vol[z * w * h + i % (w * h)];
    mix(bits(hl[i]));
  }

  // Cube maps: texel (f, x, y) holds f * 10000 + y * 100 + x; two cubes hold it + 100000 * cube.
  const int cw = 8, ndirs = 125;
  std::vector<float> faces(2 * 6 * cw * cw);
  for (int i = 0; i < (int)faces.size(); ++i)
    faces[i] = (float)(i / (6 * cw * cw) * 100000 + i / (cw * cw) % 6 * 10000 + i / cw % cw * 100 + i % cw);
  cudaArray_t cubeArr, cubesArr;
  CHECK(cudaMalloc3DArray(&cubeArr, &fd, make_cudaExtent(cw, cw, 6), cudaArrayCubemap));
  CHECK(cudaMalloc3DArray(&cubesArr, &fd, make_cudaExtent(cw, cw, 12), cudaArrayCubemap | cudaArrayLayered));
  cudaArray_t notSquare;
  ok &= cudaMalloc3DArray(&notSquare, &fd, make_cudaExtent(cw, cw + 1, 6), cudaArrayCubemap) == cudaErrorInvalidValue;
  cudaGetLastError();
  for (cudaArray_t a : {cubeArr, cubesArr}) {
    cudaMemcpy3DParms c = {};
    c.srcPtr = make_cudaPitchedPtr(faces.data(), cw * sizeof(float), cw, cw);
    c.dstArray = a;
    c.extent = make_cudaExtent(cw, cw, a == cubeArr ? 6 : 12);
    c.kind = cudaMemcpyHostToDevice;
    CHECK(cudaMemcpy3D(&c));
  }
  cudaTextureObject_t cubeTex = make(of_array(cubeArr), cudaAddressModeClamp, cudaFilterModePoint, cudaReadModeElementType, 1);
  cudaTextureObject_t cubesTex =
      make(of_array(cubesArr), cudaAddressModeClamp, cudaFilterModePoint, cudaReadModeElementType, 1);
  // Directions with no two components of one magnitude (the face is then the major axis's).
  std::vector<float3> dirs(ndirs);
  for (int k = 0; k < ndirs; ++k)
    dirs[k] = make_float3(k % 5 - 2 + 0.13f, k / 5 % 5 - 2 + 0.29f, k / 25 % 5 - 2 + 0.47f);
  float *cubeOut, *faceOut;
  float3 *ddirs;
  CHECK(cudaMalloc(&cubeOut, 3 * 6 * cw * cw * sizeof(float)));
  CHECK(cudaMalloc(&faceOut, ndirs * sizeof(float)));
  CHECK(cudaMalloc(&ddirs, ndirs * sizeof(float3)));
  CHECK(cudaMemcpy(ddirs, dirs.data(), ndirs * sizeof(float3), cudaMemcpyHostToDevice));
  cubemaps<<<dim3(2, 2), dim3(cw, cw)>>>(cubeTex, cubesTex, cubeOut, ddirs, faceOut, cw, ndirs);
  CHECK(cudaGetLastError());
  std::vector<float> hcube(3 * 6 * cw * cw), hface(ndirs);
  CHECK(cudaMemcpy(hcube.data(), cubeOut, hcube.size() * sizeof(float), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hface.data(), faceOut, hface.size() * sizeof(float), cudaMemcpyDeviceToHost));
  for (int i = 0; i < 6 * cw * cw; ++i) {
    ok &= hcube[3 * i] == faces[i] && hcube[3 * i + 1] == faces[i] && hcube[3 * i + 2] == faces[6 * cw * cw + i];
    for (int j = 0; j < 3; ++j)
      mix(bits(hcube[3 * i + j]));
  }
  for (int k = 0; k < ndirs; ++k) {
    float ax = fabsf(dirs[k].x), ay = fabsf(dirs[k].y), az = fabsf(dirs[k].z);
    int want = ax > ay && ax > az ? (dirs[k].x > 0 ? 0 : 1) : ay > az ? (dirs[k].y > 0 ? 2 : 3) : (dirs[k].z > 0 ? 4 : 5);
    int face = (int)hface[k] / 10000;
    ok &= face == want;
    mix((uint32_t)face);
  }

  // A surface over a 2-D array: written, read back through the surface and by a copy.
  cudaArray_t surfArr;
  CHECK(cudaMallocArray(&surfArr, &fd, w, h, cudaArraySurfaceLoadStore));
  cudaSurfaceObject_t surf;
  cudaResourceDesc sr = of_array(surfArr);
  CHECK(cudaCreateSurfaceObject(&surf, &sr));
  float *seen;
  CHECK(cudaMalloc(&seen, w * h * sizeof(float)));
  dim3 sgrid((w + 2 + 15) / 16, (h + 7) / 8);
  paint<<<sgrid, block>>>(surf, w, h);
  look<<<sgrid, block>>>(surf, seen, w, h);
  CHECK(cudaGetLastError());
  std::vector<float> painted(w * h), hs(w * h);
  CHECK(cudaMemcpy2DFromArray(painted.data(), w * sizeof(float), surfArr, 0, 0, w * sizeof(float), h,
                              cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hs.data(), seen, hs.size() * sizeof(float), cudaMemcpyDeviceToHost));
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      int right = x + 1 < w ? x + 1 : w - 1;
      ok &= painted[y * w + x] == (float)((x + 1) * 1000 + y) && hs[y * w + x] == (float)((right + 1) * 1000 + y);
      mix(bits(hs[y * w + x]));
    }
  CHECK(cudaDestroySurfaceObject(surf));
  CHECK(cudaFreeArray(surfArr));

  // Copies back out of an array, its description, the texture's.
  std::vector<float> back(w * h);
  CHECK(cudaMemcpy2DFromArray(back.data(), w * sizeof(float), arr, 0, 0, w * sizeof(float), h, cudaMemcpyDeviceToHost));
  for (int i = 0; i < w * h; ++i)
    ok &= back[i] == img[i];
  cudaChannelFormatDesc got;
  cudaExtent ext;
  unsigned flags;
  CHECK(cudaArrayGetInfo(&got, &ext, &flags, varr));
  ok &= got.x == 32 && got.f == cudaChannelFormatKindFloat && ext.width == (size_t)w && ext.height == (size_t)h &&
        ext.depth == (size_t)d;
  cudaResourceDesc asked;
  CHECK(cudaGetTextureObjectResourceDesc(&asked, pitchTex));
  ok &= asked.resType == cudaResourceTypePitch2D && asked.res.pitch2D.pitchInBytes == pitch;

  // A format textures do not have: three 8-bit channels.
  cudaChannelFormatDesc bad = cudaCreateChannelDesc(8, 8, 8, 0, cudaChannelFormatKindUnsigned);
  cudaArray_t none;
  ok &= cudaMallocArray(&none, &bad, w, h) == cudaErrorInvalidChannelDescriptor;
  cudaGetLastError();

  for (cudaTextureObject_t t :
       {point, linear, colorTex, intTex, volTex, pitchTex, shortTex, halfTex, layerTex, cubeTex, cubesTex})
    CHECK(cudaDestroyTextureObject(t));
  for (cudaArray_t a : {arr, carr, varr, sarr, harr, larr, cubeArr, cubesArr})
    CHECK(cudaFreeArray(a));
  printf("filtered: worst error %.6f\n", worst);
  printf("checksum %016llx\n%s\n", (unsigned long long)sum, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
