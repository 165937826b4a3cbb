// A blocking TCP client socket whose every operation ends by a deadline: what the export thread talks
// to a collector with. A collector that is down or slow costs the export thread time, never a worker.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace sluice::proxy::telemetry {

using ExportClock = std::chrono::steady_clock;

class TimedSocket {
 public:
  TimedSocket() = default;
  ~TimedSocket();
  TimedSocket(const TimedSocket&) = delete;
  TimedSocket& operator=(const TimedSocket&) = delete;

  // Resolves and connects; false with `error` set on failure or when the deadline passes.
  bool connect(const std::string& host, std::uint16_t port, ExportClock::time_point deadline, std::string& error);
  bool write_all(std::string_view data, ExportClock::time_point deadline, std::string& error);
  // Reads what is there (waiting for some); 0 means the peer closed; -1 an error or the deadline.
  long read_some(char* buf, std::size_t size, ExportClock::time_point deadline, std::string& error);
  bool is_open() const { return fd_ >= 0; }
  void close();

 private:
  bool wait(short events, ExportClock::time_point deadline, std::string& error);
  int fd_ = -1;
};

}  // namespace sluice::proxy::telemetry
