// Spans on the wire: OTLP ExportTraceServiceRequest (protobuf) and Zipkin v2 JSON.
#pragma once

#include <string>
#include <vector>

#include "proxy/telemetry/config.h"
#include "proxy/telemetry/span.h"

namespace sluice::proxy::telemetry {

std::string encode_otlp_traces(const std::vector<FinishedSpan>& spans, const Attributes& resource);
// `service_name` is each span's localEndpoint.serviceName.
std::string encode_zipkin(const std::vector<FinishedSpan>& spans, const std::string& service_name);

}  // namespace sluice::proxy::telemetry
