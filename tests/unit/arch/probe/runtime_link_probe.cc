// Links libkplan_runtime alone, as a language binding would (one C API call pulls in the C API's
// object and so everything the runtime reaches). The arrows test reads this binary's link map
// and symbols: no compiler code and no NVRTC may come with the runtime.
#include <stdio.h>

#include "kplan/kplan.h"

int main(void) {
  kplan_plan* plan = NULL;
  if (kplan_plan_open("/nonexistent.kplan", NULL, &plan) != KPLAN_STATUS_OK) puts(kplan_error_last());
  return 0;
}
