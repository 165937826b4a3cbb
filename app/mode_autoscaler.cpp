// Placeholder for the 'autoscaler' mode until its issue lands.
#include <cstdio>

#include "app/modes.h"

namespace sluice::app {

int run_autoscaler(Args) {
  std::fputs("sluice: the 'autoscaler' mode is not built yet\n", stderr);
  return 2;
}

}  // namespace sluice::app
