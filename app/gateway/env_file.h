// Environment files for the gateway's instances, in compose's `env_file` format (also foreman's and
// `heroku local`'s `.env`): `NAME=value` a line, `#` comments and blank lines skipped, an optional
// `export ` before the name, values unquoted (trimmed; ` #` starts a comment), in single quotes (taken as
// written) or double quotes (\n, \r, \t, \\, \" and \$ unescaped); quoted values may span lines; a bare
// `NAME` takes the gateway's own value when it has one. No interpolation.
//
// Values are secrets as often as not: no message here (or made from what is returned) quotes one.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace sluice::app::gateway {

struct EnvFileResult {
  std::vector<std::pair<std::string, std::string>> vars;  // in file order; a later line wins
  std::vector<std::string> errors;                         // "source:line: reason", never a value
};

EnvFileResult parse_env_file(const std::string& text, const std::string& source);

}  // namespace sluice::app::gateway
