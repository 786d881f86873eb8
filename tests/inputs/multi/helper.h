#ifndef FACTOR
#error FACTOR must be defined
#endif
void fill_squares(float *a, long n);
long count_wrong(const float *a, long n, float factor);
