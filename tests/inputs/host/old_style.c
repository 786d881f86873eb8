#include <stdio.h>
main() { int x = helper(3); printf("%d\n", x); return 0; }
int helper(int a) { return a * 2; }
