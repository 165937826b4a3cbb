// Deadlines on one timer per worker; see watchdog.h.
#include "common/watchdog.h"

#include <algorithm>

namespace sluice::net {

Watchdog::~Watchdog() {
  if (all_ && index_ != kOut) all_->remove(*this);
}

void Watchdog::rearm() {
  if (!all_) return;
  auto d = target_->next_deadline();
  if (d < when_) all_->set(*this, d);
}

void Watchdog::disarm() {
  if (all_) all_->set(*this, Clock::time_point::max());
}

Watchdogs::~Watchdogs() {
  // Connections the io_context destroys after this (a forced stop) must not reach back.
  for (auto* w : heap_) w->all_ = nullptr;
  for (auto* w : due_)
    if (w) w->all_ = nullptr;
}

void Watchdogs::sift_up(std::size_t i) {
  auto* w = heap_[i];
  while (i > 0) {
    auto parent = (i - 1) / 2;
    if (!(w->when_ < heap_[parent]->when_)) break;
    place(i, heap_[parent]);
    i = parent;
  }
  place(i, w);
}

void Watchdogs::sift_down(std::size_t i) {
  auto* w = heap_[i];
  const auto n = heap_.size();
  while (true) {
    auto child = 2 * i + 1;
    if (child >= n) break;
    if (child + 1 < n && before(child + 1, child)) ++child;
    if (!(heap_[child]->when_ < w->when_)) break;
    place(i, heap_[child]);
    i = child;
  }
  place(i, w);
}

void Watchdogs::set(Watchdog& w, Clock::time_point when) {
  if (w.index_ == Watchdog::kDue) return;  // being fired: fire() re-reads its deadline afterwards
  if (when == Clock::time_point::max()) {
    if (w.index_ != Watchdog::kOut) remove(w);
    w.when_ = when;
    return;
  }
  const bool earlier = when < w.when_;
  w.when_ = when;
  if (w.index_ == Watchdog::kOut) {
    heap_.push_back(&w);
    w.index_ = heap_.size() - 1;
    sift_up(w.index_);
  } else if (earlier) {
    sift_up(w.index_);
  } else {
    sift_down(w.index_);
  }
  if (when < armed_) arm();
}

void Watchdogs::remove(Watchdog& w) {
  if (w.index_ == Watchdog::kDue) {
    std::replace(due_.begin(), due_.end(), &w, static_cast<Watchdog*>(nullptr));
  } else {
    const auto i = w.index_;
    auto* last = heap_.back();
    heap_.pop_back();
    if (last != &w) {
      place(i, last);
      sift_down(i);
      sift_up(last->index_);
    }
  }
  w.index_ = Watchdog::kOut;
  w.when_ = Clock::time_point::max();
  // Otherwise the timer is left as it is: when it fires early it finds nothing due and waits for the
  // next entry. With nothing left to watch it stops, so an idle worker has no timer pending.
  if (heap_.empty() && armed_ != Clock::time_point::max()) {
    armed_ = Clock::time_point::max();
    timer_.cancel();
  }
}

void Watchdogs::arm() {
  armed_ = heap_.empty() ? Clock::time_point::max() : heap_.front()->when_;
  if (armed_ == Clock::time_point::max()) return;
  timer_.expires_at(armed_);  // cancels the previous wait, whose handler then does nothing
  // `this` outlives every wait that completes without an error: the worker's Watchdogs are destroyed only
  // once its io_context has stopped running handlers.
  timer_.async_wait([this](error_code ec) {
    if (!ec) fire();
  });
}

void Watchdogs::fire() {
  armed_ = Clock::time_point::max();
  const auto now = Clock::now();
  // Everything due is taken out first, so that a target moving its deadline (or destroying another
  // watchdog) while it is told cannot disturb the walk.
  due_.clear();
  while (!heap_.empty() && heap_.front()->when_ <= now) {
    auto* w = heap_.front();
    remove(*w);
    w->index_ = Watchdog::kDue;
    due_.push_back(w);
  }
  for (std::size_t i = 0; i < due_.size(); ++i) {
    auto* w = due_[i];
    if (!w) continue;  // destroyed by an earlier one's on_deadline()
    auto d = w->target_->next_deadline();
    if (d <= now) {
      w->target_->on_deadline();
      if (!due_[i]) continue;  // it destroyed its own watchdog
      d = w->target_->next_deadline();
    }
    w->index_ = Watchdog::kOut;
    due_[i] = nullptr;
    if (d != Clock::time_point::max()) set(*w, d);  // still due: the timer fires again at once
  }
  due_.clear();
  if (armed_ == Clock::time_point::max()) arm();
}

}  // namespace sluice::net
