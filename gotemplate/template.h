// Go's text/template: a template parsed once (template.New(name).Parse), then executed any number of times
// over a data model (data.h). Executing allocates only the output and the values it prints, in scratch space
// the caller reuses.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "gotemplate/data.h"

namespace sluice::gotemplate {

struct Program;

// The data model's number for a field or method name (0: none of its types has it), asked once per name
// in the template while it is parsed.
using MemberOf = MemberId (*)(std::string_view name);

class Template {
 public:
  // Parses `text` as template.New(name).Parse does. Throws std::invalid_argument with Go's message where
  // Go's Parse fails ("template: name:1: unexpected EOF"). Fields are not checked here: a missing one fails
  // when the template runs, as in Go.
  Template(std::string_view name, std::string_view text, MemberOf member_of);
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // Appends what the template writes for `dot` (Template.Execute). Throws EvalError where Go's Execute
  // returns an error; `out` then holds what was written before it.
  void execute(std::string& out, Data& data, const Value& dot) const;

 private:
  std::unique_ptr<Program> program_;
};

}  // namespace sluice::gotemplate
