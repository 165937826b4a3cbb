#include "proxy/downstream/context.h"

#include "common/log.h"

namespace sluice::proxy {

void ServerContext::served(std::exception_ptr e, bool resting) {
  if (e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      log::error("connection failed").kv("error", ex.what());
    }
  }
  if (!resting && connection_count) connection_count->connection_ended();
}

}  // namespace sluice::proxy
