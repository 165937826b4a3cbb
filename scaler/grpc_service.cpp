// The ExternalScaler RPCs (gRPC's synchronous API: each call runs on a gRPC thread and waits on the
// RevisionScaler's published decision). Bad metadata is INVALID_ARGUMENT naming the key; no decision yet
// (no sidecar answered) is UNAVAILABLE, which KEDA treats as a scaler error (its fallback applies).
#include "scaler/grpc_service.h"

#include <grpcpp/grpcpp.h>

#include "common/config_error.h"
#include "scaler/externalscaler.grpc.pb.h"
#include "scaler/scaled_objects.h"

namespace sluice::scaler {
namespace {

using namespace std::chrono_literals;

// How long a unary call waits for a ScaledObject's first decision (its first scrape round).
constexpr auto kFirstDecisionWait = 2500ms;

class ExternalScalerService final : public externalscaler::ExternalScaler::Service {
 public:
  explicit ExternalScalerService(ScaledObjects& objects) : objects_(objects) {}

  grpc::Status IsActive(grpc::ServerContext*, const externalscaler::ScaledObjectRef* ref,
                        externalscaler::IsActiveResponse* response) override {
    Published p;
    if (auto status = decision(*ref, p); !status.ok()) return status;
    response->set_result(p.active);
    return grpc::Status::OK;
  }

  grpc::Status StreamIsActive(grpc::ServerContext* context, const externalscaler::ScaledObjectRef* ref,
                              grpc::ServerWriter<externalscaler::IsActiveResponse>* writer) override {
    std::shared_ptr<RevisionScaler> object;
    if (auto status = track(*ref, object); !status.ok()) return status;
    object->stream_opened();
    std::optional<bool> sent;
    // The first decision is sent as soon as there is one, then each change as it is published.
    while (!context->IsCancelled() && !object->stopped() && !object->forgotten()) {
      const Published p = object->wait_activity_change(sent, 200ms);
      if (!p.decided || (sent && *sent == p.active)) continue;
      externalscaler::IsActiveResponse response;
      response.set_result(p.active);
      if (!writer->Write(response)) break;
      sent = p.active;
    }
    object->stream_closed();
    return context->IsCancelled() ? grpc::Status::CANCELLED : grpc::Status::OK;
  }

  grpc::Status GetMetricSpec(grpc::ServerContext*, const externalscaler::ScaledObjectRef* ref,
                             externalscaler::GetMetricSpecResponse* response) override {
    std::shared_ptr<RevisionScaler> object;
    if (auto status = track(*ref, object); !status.ok()) return status;
    auto* spec = response->add_metricspecs();
    spec->set_metricname(kMetricName);
    spec->set_targetsize(1);
    spec->set_targetsizefloat(1);
    return grpc::Status::OK;
  }

  grpc::Status GetMetrics(grpc::ServerContext*, const externalscaler::GetMetricsRequest* request,
                          externalscaler::GetMetricsResponse* response) override {
    Published p;
    if (auto status = decision(request->scaledobjectref(), p); !status.ok()) return status;
    auto* value = response->add_metricvalues();
    value->set_metricname(request->metricname().empty() ? kMetricName : request->metricname());
    value->set_metricvalue(p.desired);
    value->set_metricvaluefloat(p.desired);
    return grpc::Status::OK;
  }

 private:
  grpc::Status track(const externalscaler::ScaledObjectRef& ref, std::shared_ptr<RevisionScaler>& out) {
    if (ref.name().empty()) return {grpc::StatusCode::INVALID_ARGUMENT, "name: the ScaledObject's name is empty"};
    try {
      out = objects_.track(ref.namespace_(), ref.name(), Metadata(ref.scalermetadata().begin(),
                                                                   ref.scalermetadata().end()));
    } catch (const ConfigError& e) {
      return {grpc::StatusCode::INVALID_ARGUMENT, std::string("scalerMetadata: ") + e.what()};
    }
    if (!out) return {grpc::StatusCode::UNAVAILABLE, "the scaler is shutting down"};
    return grpc::Status::OK;
  }

  grpc::Status decision(const externalscaler::ScaledObjectRef& ref, Published& out) {
    std::shared_ptr<RevisionScaler> object;
    if (auto status = track(ref, object); !status.ok()) return status;
    out = object->wait_decision(kFirstDecisionWait);
    if (!out.decided) return {grpc::StatusCode::UNAVAILABLE, "no decision yet: " + out.why_undecided};
    return grpc::Status::OK;
  }

  ScaledObjects& objects_;
};

}  // namespace

std::unique_ptr<grpc::Service> make_external_scaler_service(ScaledObjects& objects) {
  return std::make_unique<ExternalScalerService>(objects);
}

}  // namespace sluice::scaler
