// Placeholder for the 'gateway' mode until its issue lands.
#include <cstdio>

#include "app/modes.h"

namespace sluice::app {

int run_gateway(Args) {
  std::fputs("sluice: the 'gateway' mode is not built yet\n", stderr);
  return 2;
}

}  // namespace sluice::app
