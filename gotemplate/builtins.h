// text/template's predefined functions (funcs.go's builtins) over template values.
#pragma once

#include <cstddef>

#include "gotemplate/program.h"
#include "gotemplate/value.h"

namespace sluice::gotemplate {

class Data;

// How a parameter takes its argument: as a reflect.Value (no value stays no value), as Go's `any` (no value
// becomes nil), or as a string (printf's format).
enum class ParamKind : std::uint8_t { reflect, any, string, integer };

struct BuiltinSig {
  const char* name;
  std::uint8_t fixed;  // parameters before the variadic ones
  bool variadic;
  ParamKind first, rest;  // the first parameter's kind, and every other one's
};
const BuiltinSig& signature(Builtin b);

// Go's truth (if, with, and, or, not): false for no value, nil, false, 0, "", and empty slices and maps.
bool truth(const Value& v, Data& data);

// Calls `b` (not and/or, which the evaluator short-circuits) with arguments already checked against its
// signature. Throws EvalError with Go's message.
Value call_builtin(Builtin b, const Value* args, std::size_t n, Data& data);

}  // namespace sluice::gotemplate
