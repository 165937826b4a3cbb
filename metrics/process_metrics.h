// The process_* families Prometheus' Go client serves beside queue-proxy's metrics, read the same way from
// /proc for this process: CPU time, memory, file descriptors, start time, and the bytes of the network
// namespace's interfaces (/proc/self/net/dev, as the Go client reads them).
#pragma once

#include <string>

namespace sluice::metrics {

// Appends the families, by name; one that cannot be read is left out.
void write_process_families(std::string& out);

}  // namespace sluice::metrics
