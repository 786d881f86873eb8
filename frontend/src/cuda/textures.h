/* Force-included into the device half of every CUDA source by hpvm-mgpu (frontend/src/cuda/):
 * texture fetches in software, the same code on GPUs and on simulated devices.
 *
 * clang's texture functions (tex1Dfetch, tex2D, tex3D, the layered ones...) are inline PTX
 * `tex.*` statements on a texture object. hpvm-mgpu's runtime makes a texture object the
 * program address of a `__hpvm_mgpu_texture` (runtime/src/cudart/textures.rs writes it; the
 * two layouts must agree), and the CUDA frontend replaces each `tex.*` statement by a call of
 * `__hpvm_mgpu_tex_fetch` (frontend/src/cuda/asm.rs, `texture`). Reading the description and
 * the texels through addresses kept in memory makes the kernel one whose addresses are
 * translated per device: it runs whole on one device, every buffer current there.
 *
 * Semantics as CUDA's programming guide gives them ("Texture Fetching"): texel centres at
 * i + 0.5; normalized coordinates scaled by the size; point sampling takes texel floor(x);
 * linear filtering weighs texels i and i + 1 by (1 - a) and a, a = frac(x - 0.5) held in
 * fixed point with 8 fractional bits; clamp, border (the border colour), wrap and mirror
 * addressing (wrap and mirror for normalized coordinates; others clamp); integer texels read
 * as normalized floats in [0, 1] or [-1, 1]; 16-bit float texels widened. Fetches from
 * linear memory (tex1Dfetch) take an integer index and read zero outside. Results are four
 * 32-bit words: floats, or the integers' values for element reads of integer texels.
 * Surface objects are the same descriptions, over CUDA arrays; their reads and writes are
 * the functions below, declared for both halves of the source. */
#if defined(__cplusplus) && defined(__CUDACC__) && !defined(HPVM_MGPU_TEXTURES)
#define HPVM_MGPU_TEXTURES

struct __hpvm_mgpu_texture {
  const unsigned char *data; /* texel (0, 0, 0) */
  unsigned long long pitch;  /* bytes from a row to the next */
  unsigned long long slice;  /* bytes from a 2-D slice (or layer) to the next */
  int size[3];               /* width, height, depth (or layers) in texels; 1 where absent */
  int channels;              /* 1, 2 or 4 */
  int bytes;                 /* per channel: 1, 2 or 4 */
  int kind;                  /* cudaChannelFormatKind: 0 signed, 1 unsigned, 2 float */
  int address[3];            /* cudaTextureAddressMode per dimension */
  int filter;                /* cudaTextureFilterMode: 0 point, 1 linear */
  int normalized_read;       /* cudaReadModeNormalizedFloat */
  int normalized_coords;
  int linear;                /* a linear-memory resource (tex1Dfetch's) */
  float border[4];
};

/* Surfaces (clang's CUDA headers declare none): CUDA's surface functions over the same
 * descriptions, the x coordinate in bytes as CUDA's is. Out of range, `cudaBoundaryModeZero`
 * reads zero and drops writes, `cudaBoundaryModeClamp` takes the nearest element, and
 * `cudaBoundaryModeTrap` (the default) stops the kernel, as a GPU's does. */
static __device__ void __hpvm_mgpu_surface(unsigned long long object, void *value, int size, int x, int y, int z,
                                           int mode, int write) {
  const __hpvm_mgpu_texture *t = (const __hpvm_mgpu_texture *)object;
  int element = t->channels * t->bytes, row = t->size[0] * element;
  int out = x < 0 || x + size > row || y < 0 || y >= t->size[1] || z < 0 || z >= t->size[2];
  if (out) {
    if (mode == 0) /* cudaBoundaryModeZero */ {
      if (!write)
        for (int k = 0; k < size; ++k)
          ((unsigned char *)value)[k] = 0;
      return;
    }
    if (mode != 1) /* cudaBoundaryModeTrap */
      __builtin_trap();
    x = x < 0 ? 0 : x + size > row ? row - element : x;
    y = y < 0 ? 0 : y >= t->size[1] ? t->size[1] - 1 : y;
    z = z < 0 ? 0 : z >= t->size[2] ? t->size[2] - 1 : z;
  }
  unsigned char *p = (unsigned char *)t->data + (unsigned long long)z * t->slice + (unsigned long long)y * t->pitch + x;
  for (int k = 0; k < size; ++k) {
    if (write)
      p[k] = ((const unsigned char *)value)[k];
    else
      ((unsigned char *)value)[k] = p[k];
  }
}

template <class T>
static __device__ void surf1Dwrite(T v, unsigned long long s, int x, int mode = 2) {
  __hpvm_mgpu_surface(s, &v, sizeof(T), x, 0, 0, mode, 1);
}
template <class T>
static __device__ void surf2Dwrite(T v, unsigned long long s, int x, int y, int mode = 2) {
  __hpvm_mgpu_surface(s, &v, sizeof(T), x, y, 0, mode, 1);
}
template <class T>
static __device__ void surf3Dwrite(T v, unsigned long long s, int x, int y, int z, int mode = 2) {
  __hpvm_mgpu_surface(s, &v, sizeof(T), x, y, z, mode, 1);
}
template <class T>
static __device__ void surf1DLayeredwrite(T v, unsigned long long s, int x, int layer, int mode = 2) {
  __hpvm_mgpu_surface(s, &v, sizeof(T), x, 0, layer, mode, 1);
}
template <class T>
static __device__ void surf2DLayeredwrite(T v, unsigned long long s, int x, int y, int layer, int mode = 2) {
  __hpvm_mgpu_surface(s, &v, sizeof(T), x, y, layer, mode, 1);
}
template <class T>
static __device__ void surf1Dread(T *v, unsigned long long s, int x, int mode = 2) {
  __hpvm_mgpu_surface(s, v, sizeof(T), x, 0, 0, mode, 0);
}
template <class T>
static __device__ void surf2Dread(T *v, unsigned long long s, int x, int y, int mode = 2) {
  __hpvm_mgpu_surface(s, v, sizeof(T), x, y, 0, mode, 0);
}
template <class T>
static __device__ void surf3Dread(T *v, unsigned long long s, int x, int y, int z, int mode = 2) {
  __hpvm_mgpu_surface(s, v, sizeof(T), x, y, z, mode, 0);
}
template <class T>
static __device__ void surf2DLayeredread(T *v, unsigned long long s, int x, int y, int layer, int mode = 2) {
  __hpvm_mgpu_surface(s, v, sizeof(T), x, y, layer, mode, 0);
}
template <class T>
static __device__ T surf1Dread(unsigned long long s, int x, int mode = 2) {
  T v;
  __hpvm_mgpu_surface(s, &v, sizeof(T), x, 0, 0, mode, 0);
  return v;
}
template <class T>
static __device__ T surf2Dread(unsigned long long s, int x, int y, int mode = 2) {
  T v;
  __hpvm_mgpu_surface(s, &v, sizeof(T), x, y, 0, mode, 0);
  return v;
}
template <class T>
static __device__ T surf3Dread(unsigned long long s, int x, int y, int z, int mode = 2) {
  T v;
  __hpvm_mgpu_surface(s, &v, sizeof(T), x, y, z, mode, 0);
  return v;
}
template <class T>
static __device__ T surf2DLayeredread(unsigned long long s, int x, int y, int layer, int mode = 2) {
  T v;
  __hpvm_mgpu_surface(s, &v, sizeof(T), x, y, layer, mode, 0);
  return v;
}

#if defined(__CUDA_ARCH__)
static __device__ float __hpvm_mgpu_half_to_float(unsigned short h) {
  unsigned sign = (unsigned)(h >> 15) << 31, exp = (h >> 10) & 31, man = h & 1023;
  unsigned bits;
  if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {
    /* A subnormal half is a normal float: shift its leading one into place. */
    exp = 113;
    while (!(man & 1024)) {
      man <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((man & 1023) << 13);
  }
  return __builtin_bit_cast(float, bits);
}

/* Channel c of texel (i, j, k), already in range, as a float (for float results) or as the
 * integer's bits. */
static __device__ unsigned __hpvm_mgpu_texel(const __hpvm_mgpu_texture *t, int i, int j, int k, int c,
                                             int as_float) {
  const unsigned char *p =
      t->data + (unsigned long long)k * t->slice + (unsigned long long)j * t->pitch +
      (unsigned long long)i * (unsigned long long)(t->channels * t->bytes) + (unsigned long long)(c * t->bytes);
  int v;
  if (t->kind == 2) {
    float f = t->bytes == 2 ? __hpvm_mgpu_half_to_float(*(const unsigned short *)p) : *(const float *)p;
    return __builtin_bit_cast(unsigned, f);
  }
  if (t->bytes == 1)
    v = t->kind == 0 ? (int)*(const signed char *)p : (int)*p;
  else if (t->bytes == 2)
    v = t->kind == 0 ? (int)*(const short *)p : (int)*(const unsigned short *)p;
  else
    v = *(const int *)p;
  if (!as_float)
    return (unsigned)v;
  float f;
  if (t->bytes == 4) {
    f = t->kind == 0 ? (float)v : (float)(unsigned)v;
  } else if (t->kind == 1) {
    f = (float)v / (t->bytes == 1 ? 255.0f : 65535.0f);
  } else {
    f = (float)v / (t->bytes == 1 ? 127.0f : 32767.0f);
    f = f < -1.0f ? -1.0f : f;
  }
  return __builtin_bit_cast(unsigned, f);
}

/* The texel at coordinate x (in texels) of a dimension of n, clamped to its edges. */
static __device__ int __hpvm_mgpu_clamp(float x, int n) {
  int i = x != x ? 0 : (int)__builtin_floorf(x);
  return i < 0 ? 0 : i >= n ? n - 1 : i;
}

/* The texel index along one dimension for coordinate x (in texels), or -1 for the border. */
static __device__ int __hpvm_mgpu_tex_index(const __hpvm_mgpu_texture *t, int d, float x) {
  int n = t->size[d], i = (int)__builtin_floorf(x);
  if (x != x)
    i = 0;
  if (t->address[d] == 3) /* border */
    return i < 0 || i >= n ? -1 : i;
  if (t->normalized_coords && t->address[d] == 0) /* wrap */
    return (i % n + n) % n;
  if (t->normalized_coords && t->address[d] == 2) { /* mirror */
    int p = (i % (2 * n) + 2 * n) % (2 * n);
    return p < n ? p : 2 * n - 1 - p;
  }
  return i < 0 ? 0 : i >= n ? n - 1 : i;
}

/* Coordinate x of dimension d in texels, after normalized coordinates' wrap or mirror. */
static __device__ float __hpvm_mgpu_tex_coord(const __hpvm_mgpu_texture *t, int d, float x) {
  if (!t->normalized_coords)
    return x;
  if (t->address[d] == 0 || t->address[d] == 2) {
    float whole = __builtin_floorf(x), f = x - whole;
    if (t->address[d] == 2 && ((long long)whole & 1))
      f = 1.0f - f;
    x = f;
  }
  return x * (float)t->size[d];
}

/* One fetch (the CUDA frontend finds it by this name inside its mangled one; internal to
 * each source, as every source has it): `dims` coordinates (x, y, z) in `layer` of a layered texture (0 otherwise), or
 * the integer index `ix` where `integer` is set; four words into `out`. `dims` 4 is a cube
 * map's direction (x, y, z) in cube `layer`: the face its major axis names (CUDA's table:
 * +x, -x, +y, -y, +z, -z are layers 0 to 5) at (s / m + 1) / 2, (t / m + 1) / 2. */
static __device__ __attribute__((used)) void __hpvm_mgpu_tex_fetch(unsigned long long object, int dims, int integer,
                                                                  int ix, float x, float y, float z, int layer,
                                                                  unsigned *out) {
  /* Unfused, so that GPUs and CPUs round alike. */
#pragma clang fp contract(off)
  const __hpvm_mgpu_texture *t = (const __hpvm_mgpu_texture *)object;
  int as_float = t->kind == 2 || t->normalized_read;
  int c;
  for (c = 0; c < 4; ++c)
    out[c] = 0;
  if (integer) {
    if (ix < 0 || ix >= t->size[0]) {
      if (!t->linear) /* arrays clamp integer coordinates too */
        ix = ix < 0 ? 0 : t->size[0] - 1;
      else
        return;
    }
    for (c = 0; c < t->channels; ++c)
      out[c] = __hpvm_mgpu_texel(t, ix, 0, layer, c, as_float);
    return;
  }
  int cube = dims == 4;
  if (cube) {
    float ax = __builtin_fabsf(x), ay = __builtin_fabsf(y), az = __builtin_fabsf(z), m, s, u;
    int face;
    if (ax >= ay && ax >= az) {
      face = x >= 0.0f ? 0 : 1;
      m = ax, s = x >= 0.0f ? -z : z, u = -y;
    } else if (ay >= az) {
      face = y >= 0.0f ? 2 : 3;
      m = ay, s = x, u = y >= 0.0f ? z : -z;
    } else {
      face = z >= 0.0f ? 4 : 5;
      m = az, s = z >= 0.0f ? x : -x, u = -y;
    }
    x = (s / m + 1.0f) * 0.5f;
    y = (u / m + 1.0f) * 0.5f;
    layer = layer * 6 + face;
    dims = 2;
  }
  /* Layers clamp, as the texture unit clamps them. */
  layer = layer < 0 ? 0 : layer >= t->size[2] ? t->size[2] - 1 : layer;
  float at[3] = {x, y, z};
  int lo[3] = {0, 0, layer}, hi[3] = {0, 0, layer};
  float a[3] = {0.0f, 0.0f, 0.0f};
  int linear = t->filter == 1 && as_float;
  int d;
  for (d = 0; d < dims; ++d) {
    /* A face's coordinates are normalized, and clamp at its edges. */
    float u = cube ? at[d] * (float)t->size[d] : __hpvm_mgpu_tex_coord(t, d, at[d]);
    if (linear) {
      float b = u - 0.5f, whole = __builtin_floorf(b);
      /* The weight in 1.8 fixed point, as the texture unit holds it. */
      a[d] = __builtin_rintf((b - whole) * 256.0f) / 256.0f;
      lo[d] = cube ? __hpvm_mgpu_clamp(whole, t->size[d]) : __hpvm_mgpu_tex_index(t, d, whole);
      hi[d] = cube ? __hpvm_mgpu_clamp(whole + 1.0f, t->size[d]) : __hpvm_mgpu_tex_index(t, d, whole + 1.0f);
    } else {
      lo[d] = hi[d] = cube ? __hpvm_mgpu_clamp(u, t->size[d]) : __hpvm_mgpu_tex_index(t, d, u);
    }
  }
  for (c = 0; c < t->channels; ++c) {
    if (!linear) {
      if (lo[0] < 0 || lo[1] < 0 || lo[2] < 0)
        out[c] = as_float ? __builtin_bit_cast(unsigned, t->border[c]) : (unsigned)(int)t->border[c];
      else
        out[c] = __hpvm_mgpu_texel(t, lo[0], lo[1], lo[2], c, as_float);
      continue;
    }
    float sum = 0.0f;
    int corner;
    for (corner = 0; corner < 1 << dims; ++corner) {
      float w = 1.0f;
      int p[3] = {lo[0], lo[1], lo[2]};
      for (d = 0; d < dims; ++d) {
        int up = corner >> d & 1;
        w *= up ? a[d] : 1.0f - a[d];
        p[d] = up ? hi[d] : lo[d];
      }
      float v = p[0] < 0 || p[1] < 0 || p[2] < 0 ? t->border[c]
                                                : __builtin_bit_cast(float, __hpvm_mgpu_texel(t, p[0], p[1], p[2], c, 1));
      sum += w * v;
    }
    out[c] = __builtin_bit_cast(unsigned, sum);
  }
}
#endif /* __CUDA_ARCH__ */
#endif
