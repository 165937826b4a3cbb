// Placeholder for the 'run' mode until its issue lands.
#include <cstdio>

#include "app/modes.h"

namespace sluice::app {

int run_instance(Args) {
  std::fputs("sluice: the 'run' mode is not built yet\n", stderr);
  return 2;
}

}  // namespace sluice::app
