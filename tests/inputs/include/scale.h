#ifndef SCALE
#error SCALE must be defined (-DSCALE=...)
#endif
