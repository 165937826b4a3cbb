// Running a template over the person model (person_model.h) in a test: its output, its execution error or
// its parse error, each as the one string a test compares.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "gotemplate/template.h"
#include "tests/unit/gotemplate/person_model.h"

namespace sluice::gotemplate::testing {

inline std::string run(std::string_view text) {
  Template t("test", text, member_of);
  Scratch scratch;
  PersonModel model(scratch);
  std::string out;
  t.execute(out, model, PersonModel::root());
  return out;
}

// Go's ExecError names the template, line and action ("template: test:1:2: executing ..."); the engine's
// message is the part after it, which is all a caller needs to say what went wrong.
inline std::string exec_error(std::string_view text) {
  try {
    run(text);
  } catch (const EvalError& e) {
    return e.what();
  }
  return "(no error)";
}

inline std::string parse_error(std::string_view text) {
  try {
    Template t("test", text, member_of);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace sluice::gotemplate::testing
