// The ScaledObject registry; see scaled_objects.h.
#include "scaler/scaled_objects.h"

#include "common/log.h"

namespace sluice::scaler {

ScaledObjects::ScaledObjects(asio::io_context& io, ScalerMetrics& metrics, ScalerTiming timing)
    : io_(io), metrics_(metrics), timing_(timing) {}

ScaledObjects::~ScaledObjects() { stop(); }

std::shared_ptr<RevisionScaler> ScaledObjects::track(const std::string& namespace_name, const std::string& name,
                                                     const Metadata& metadata) {
  auto settings = parse_settings(metadata);  // before the lock: a bad value changes nothing
  std::lock_guard lock(mu_);
  if (stopped_) return nullptr;
  std::erase_if(objects_, [](const auto& entry) { return entry.second->forgotten(); });
  const std::string key = namespace_name + "/" + name;
  auto& object = objects_[key];
  if (object) {
    object->update(std::move(settings));
    return object;
  }
  log::info("tracking a ScaledObject").kv("namespace", namespace_name).kv("name", name)
      .kv("sidecar_entries", static_cast<std::uint64_t>(settings.sidecars.size()));
  object = std::make_shared<RevisionScaler>(io_, metrics_, RevisionLabels{namespace_name, name},
                                            std::move(settings), timing_);
  object->start();
  return object;
}

void ScaledObjects::stop() {
  std::lock_guard lock(mu_);
  stopped_ = true;
  for (const auto& [key, object] : objects_) object->stop();
  objects_.clear();
}

}  // namespace sluice::scaler
