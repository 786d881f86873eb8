// A warp reduction: not taken yet, the build must say so at the shuffle's line.
__global__ void reduce(const float *in, float *out) {
  float v = in[threadIdx.x];
  v += __shfl_down_sync(0xffffffffu, v, 16);
  out[threadIdx.x] = v;
}

int main() {
  reduce<<<1, 32>>>(nullptr, nullptr);
  return 0;
}
