// Running a parsed template over a data model (Go's Template.Execute; internal to gotemplate/).
#pragma once

#include <string>

#include "gotemplate/data.h"
#include "gotemplate/program.h"
#include "gotemplate/value.h"

namespace sluice::gotemplate {

// Appends what the program's own template writes for `dot` to `out`; throws EvalError where Go's Execute
// returns an error.
void execute(const Program& program, Data& data, const Value& dot, std::string& out);

}  // namespace sluice::gotemplate
