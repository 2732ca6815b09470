// File: tests/unit/task_queue_test.cc
// base/task_queue.h: tasks run in submission order on one thread; onThread() tells a task of the
// queue (which must not drain it) from any other thread; a drained queue has nothing pending.
#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "base/task_queue.h"

namespace tutti {
namespace {

TEST_CASE("TaskQueue: order, one thread, and onThread inside tasks only") {
  TaskQueue q;
  CHECK_FALSE(q.onThread());
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::thread::id> threads;
  std::atomic<int> inside{0};
  TaskQueue other;
  for (int i = 0; i < 50; ++i)
    q.submit([&, i] {
      if (q.onThread() && !other.onThread()) inside.fetch_add(1);
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(i);
      threads.push_back(std::this_thread::get_id());
    });
  q.drain();
  CHECK(q.pending() == 0);
  REQUIRE(order.size() == 50);
  for (int i = 0; i < 50; ++i) CHECK(order[i] == i);
  for (const auto& t : threads) CHECK(t == threads.front());
  CHECK(threads.front() != std::this_thread::get_id());
  CHECK(inside.load() == 50);
  CHECK_FALSE(q.onThread());
}

}  // namespace
}  // namespace tutti
