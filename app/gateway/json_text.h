// JSON text for what the gateway shows (status, dashboard events): numbers as a person writes them
// (`0`, `12.5`, never boost::json's `0E0`), so that jq, a browser and a reader all see plain numbers.
#pragma once

#include <string>

#include <boost/json/value.hpp>

namespace sluice::app::gateway {

std::string json_text(const boost::json::value& v);

}  // namespace sluice::app::gateway
