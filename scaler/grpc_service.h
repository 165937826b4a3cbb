// KEDA's ExternalScaler service over the ScaledObjects registry: GetMetrics answers the KPA's desired
// pod count, GetMetricSpec a target of 1 per pod (so HPA's AverageValue lands on that count), IsActive
// and StreamIsActive whether the KPA wants any pod.
#pragma once

#include <memory>
#include <string>

namespace grpc {
class Service;
}  // namespace grpc

namespace sluice::scaler {

class ScaledObjects;

// The metric's name in GetMetricSpec (KEDA prefixes it with the trigger's index for the HPA).
inline constexpr const char* kMetricName = "kpa-desired-pods";

std::unique_ptr<grpc::Service> make_external_scaler_service(ScaledObjects& objects);

}  // namespace sluice::scaler
