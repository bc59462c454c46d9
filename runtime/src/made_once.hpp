#pragma once
// A map whose values are made once per key, by the first caller that needs one, outside any lock:
// callers of a key that is being made wait for that one making, and callers of keys already made
// never wait on anything but a shared lock held for a lookup. (The library prepares kernels so:
// a thread calling a prepared problem must not stall while another compiles.)
#include <future>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

namespace gemmtune {

template <class Key, class T, class Hash = std::hash<Key>>
class MadeOnce {
 public:
  using Value = std::shared_ptr<const T>;

  // The value for `key`, made by `make` if nobody has made it. A making that throws makes
  // nothing: its waiters get the exception, and the next caller tries again.
  template <class Make>
  Value get(const Key& key, Make&& make) {
    {
      std::shared_lock lock(mutex_);
      if (auto it = made_.find(key); it != made_.end()) return it->second;
    }
    std::promise<Value> promise;
    std::shared_future<Value> making;
    uint64_t generation = 0;
    {
      std::unique_lock lock(mutex_);
      if (auto it = made_.find(key); it != made_.end()) return it->second;
      if (auto it = making_.find(key); it != making_.end()) {
        making = it->second;
        lock.unlock();
        return making.get();
      }
      making_.emplace(key, promise.get_future().share());
      generation = generation_;
    }
    try {
      Value value = make();
      {
        std::unique_lock lock(mutex_);
        making_.erase(key);
        // Made from what clear() dropped: served to this call and its waiters, not kept.
        if (generation == generation_) made_.emplace(key, value);
      }
      promise.set_value(value);
      return value;
    } catch (...) {
      {
        std::unique_lock lock(mutex_);
        making_.erase(key);
      }
      promise.set_exception(std::current_exception());
      throw;
    }
  }

  // Forgets the value of `key` if it is still `value` (another caller may have replaced it), so
  // that the next get() makes it again.
  void forget(const Key& key, const Value& value) {
    std::unique_lock lock(mutex_);
    if (auto it = made_.find(key); it != made_.end() && it->second == value) made_.erase(it);
  }

  // Forgets every value made; makings under way finish for their callers but are not kept.
  void clear() {
    std::unique_lock lock(mutex_);
    made_.clear();
    ++generation_;
  }

 private:
  std::shared_mutex mutex_;
  std::unordered_map<Key, Value, Hash> made_;
  std::unordered_map<Key, std::shared_future<Value>, Hash> making_;
  uint64_t generation_ = 0;
};

}  // namespace gemmtune
