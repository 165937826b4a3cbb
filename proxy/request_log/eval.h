// Running a parsed request-log template over one exchange (Go's Template.Execute).
#pragma once

#include <string>

#include "proxy/request_log/data.h"
#include "proxy/request_log/program.h"

namespace sluice::proxy::request_log {

// Appends what "requestLog" writes to `out`; throws EvalError where Go's Execute returns an error (the
// caller then drops what was written, as Knative renders into a buffer first).
void execute(const Program& program, Data& data, std::string& out);

}  // namespace sluice::proxy::request_log
