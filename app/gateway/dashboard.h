// The gateway's dashboard: GET / on the admin port. One self-contained page (no external assets, works
// offline) that polls /.sluice/status every second and shows services, revisions and traffic, instances
// and their states, in-flight and queued requests, latency percentiles and cold starts over time.
#pragma once

#include <string_view>

namespace sluice::app::gateway {

std::string_view dashboard_html();

}  // namespace sluice::app::gateway
