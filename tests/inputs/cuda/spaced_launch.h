// Included with quotes from spaced_launch.cu, which is compiled from a respelled copy: found
// beside the original all the same.
#define SPACED_BLOCK 32
