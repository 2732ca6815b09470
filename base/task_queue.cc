// File: base/task_queue.cc
// The in-order task thread (base/task_queue.h).
#include "base/task_queue.h"

#include <condition_variable>
#include <deque>
#include <mutex>

namespace tutti {

struct TaskQueue::Shared {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> queue;
  int running = 0;
  bool stop = false;
};

namespace {
// The queue whose thread this is (nullptr on other threads).
thread_local const void* tQueue = nullptr;
}  // namespace

TaskQueue::TaskQueue() : sh_(std::make_shared<Shared>()) {}

bool TaskQueue::onThread() const { return tQueue == sh_.get(); }

TaskQueue::~TaskQueue() { stop(std::chrono::hours(24), false); }

void TaskQueue::submit(std::function<void()> task) {
  std::lock_guard<std::mutex> lock(sh_->mu);
  pending_->fetch_add(1);
  sh_->queue.push_back(std::move(task));
  if (!thread_.joinable()) {
    thread_ = std::thread([sh = sh_, pending = pending_] {
      tQueue = sh.get();
      std::unique_lock<std::mutex> lock(sh->mu);
      for (;;) {
        sh->cv.wait(lock, [&] { return sh->stop || !sh->queue.empty(); });
        if (sh->queue.empty()) return;
        auto t = std::move(sh->queue.front());
        sh->queue.pop_front();
        ++sh->running;
        lock.unlock();
        t();
        t = nullptr;  // drop what the task captured before reporting it finished
        lock.lock();
        --sh->running;
        pending->fetch_sub(1);
        sh->cv.notify_all();
      }
    });
  }
  sh_->cv.notify_all();
}

void TaskQueue::drain() {
  std::unique_lock<std::mutex> lock(sh_->mu);
  sh_->cv.wait(lock, [&] { return pending_->load() == 0; });
}

void TaskQueue::stop(std::chrono::milliseconds wait, bool detachIfBusy) {
  if (thread_.joinable() && thread_.get_id() == std::this_thread::get_id()) {
    // The last owner let go inside a task of this very thread: it ends after that task.
    std::lock_guard<std::mutex> lock(sh_->mu);
    sh_->stop = true;
    thread_.detach();
    return;
  }
  {
    std::unique_lock<std::mutex> lock(sh_->mu);
    sh_->stop = true;
    sh_->cv.notify_all();
    sh_->cv.wait_for(lock, wait, [&] { return pending_->load() == 0; });
  }
  if (!thread_.joinable()) return;
  if (detachIfBusy && pending_->load() > 0) {
    thread_.detach();  // finishes its task on its own; it holds what it needs
    return;
  }
  thread_.join();
}

}  // namespace tutti
