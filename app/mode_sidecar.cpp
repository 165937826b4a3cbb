#include "app/modes.h"
namespace sluice::app {
int run_sidecar(Args) { return 2; }
}  // namespace sluice::app
