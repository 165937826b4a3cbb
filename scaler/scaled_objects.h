// Every ScaledObject KEDA has asked about, keyed by namespace/name, each with its RevisionScaler. The
// first RPC about one starts its loop; later RPCs with changed metadata update it.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "scaler/revision_scaler.h"

namespace sluice::scaler {

class ScaledObjects {
 public:
  ScaledObjects(asio::io_context& io, ScalerMetrics& metrics, ScalerTiming timing);
  ~ScaledObjects();

  // Any thread. Throws ConfigError naming the metadata key that is malformed.
  std::shared_ptr<RevisionScaler> track(const std::string& namespace_name, const std::string& name,
                                        const Metadata& metadata);
  // Ends every loop and wakes every waiting RPC; track() refuses afterwards (returns nullptr).
  void stop();

 private:
  asio::io_context& io_;
  ScalerMetrics& metrics_;
  ScalerTiming timing_;
  std::mutex mu_;
  bool stopped_ = false;
  std::map<std::string, std::shared_ptr<RevisionScaler>> objects_;
};

}  // namespace sluice::scaler
