// Template: the parsed program and its execution; see template.h.
#include "gotemplate/template.h"

#include "gotemplate/eval.h"
#include "gotemplate/program.h"

namespace sluice::gotemplate {

Template::Template(std::string_view name, std::string_view text, MemberOf member_of)
    : program_(std::make_unique<Program>(parse(name, text, member_of))) {}
Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

void Template::execute(std::string& out, Data& data, const Value& dot) const { gotemplate::execute(*program_, data, dot, out); }

}  // namespace sluice::gotemplate
