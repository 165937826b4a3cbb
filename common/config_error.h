// A start-up configuration error: names the key, the value and what is allowed. Caught in main, exit 2.
#pragma once

#include <stdexcept>
#include <string>

namespace sluice {

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace sluice
