// Go's fmt over template values: Sprint, Sprintln, Sprintf (verbs, flags, width, precision, argument
// indexes, and fmt's "%!verb(type=value)" complaints), and the template's own printing of an action's value.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "gotemplate/value.h"

namespace sluice::gotemplate {

class Data;

// What {{pipeline}} writes: text/template's printValue (pointers to structs print as the struct; no value
// prints "<no value>").
void print_action_value(std::string& out, const Value& v, Data& data);
// Arguments are Go's `any` values: invalid ones must already be nil.
void sprint(std::string& out, const Value* args, std::size_t n, Data& data);
void sprintln(std::string& out, const Value* args, std::size_t n, Data& data);
// html, js and urlquery's text: their arguments as the template prints them, joined as Sprint joins.
void sprint_printable(std::string& out, const Value* args, std::size_t n, Data& data);
void sprintf(std::string& out, std::string_view format, const Value* args, std::size_t n, Data& data);

}  // namespace sluice::gotemplate
