// File: tests/unit/emu_stream.h
// An emulated CUDA stream for tests of the device executors without a GPU (clique_test.cc,
// peer_executor_test.cc): a worker thread that runs its tasks in order, sleeping a random few
// microseconds before one task in four so that streams interleave differently run to run.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

namespace tutti::test {

class EmuStream {
 public:
  explicit EmuStream(uint32_t seed) : rng_(seed), thread_([this] { loop(); }) {}
  ~EmuStream() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void enqueue(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      q_.push_back(std::move(task));
      ++queued_;
    }
    cv_.notify_all();
  }
  void synchronize() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t target = queued_;
    idle_.wait(lock, [&] { return ran_ >= target; });
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !q_.empty(); });
        if (q_.empty()) return;
        task = std::move(q_.front());
        q_.pop_front();
      }
      if (rng_() % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng_() % 200));
      task();
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++ran_;
      }
      idle_.notify_all();
    }
  }
  std::mt19937 rng_;
  std::mutex mu_;
  std::condition_variable cv_, idle_;
  std::deque<std::function<void()>> q_;
  uint64_t queued_ = 0, ran_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tutti::test
