// File: transports/fifo.h
// A FIFO that keeps its capacity: a repeated call pushes and pops without allocating. The shm and
// tcp connections queue their posted sends and receives in it.
#pragma once

#include <cstddef>
#include <vector>

namespace tutti::transport {

template <typename T>
class Fifo {
 public:
  bool empty() const { return head_ == items_.size(); }
  size_t size() const { return items_.size() - head_; }
  T& front() { return items_[head_]; }
  /// The i-th element from the front.
  T& operator[](size_t i) { return items_[head_ + i]; }
  const T& operator[](size_t i) const { return items_[head_ + i]; }
  void push(const T& v) { items_.push_back(v); }
  void pop() {
    if (++head_ == items_.size()) {
      items_.clear();
      head_ = 0;
    }
  }

 private:
  std::vector<T> items_;
  size_t head_ = 0;
};

}  // namespace tutti::transport
