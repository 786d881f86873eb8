/* A C program that does not use HPVM at all. */
#include <stdio.h>

int main(void) {
  printf("hello\n");
  return 0;
}
