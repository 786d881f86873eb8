/* Calls a function defined nowhere: the link must fail and say where it is called. */
#include <hpvm.h>

void missing_function(void);

int main(void) {
  __hpvm__init();
  missing_function();
  __hpvm__cleanup();
  return 0;
}
