// A body buffer allocated on first use: most exchanges never need one (bodies that arrive whole with
// their head are relayed from the read buffer), so idle and small-exchange connections cost no body memory.
#pragma once

#include <cstddef>
#include <memory>
#include <span>

namespace sluice::proxy::h1 {

class ScratchBuffer {
 public:
  explicit ScratchBuffer(std::size_t size) : size_(size) {}
  std::span<char> get() {
    if (!data_) data_ = std::make_unique_for_overwrite<char[]>(size_);
    return {data_.get(), size_};
  }
  std::size_t size() const { return size_; }

 private:
  std::unique_ptr<char[]> data_;
  std::size_t size_;
};

}  // namespace sluice::proxy::h1
