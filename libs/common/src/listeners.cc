#include "codeco/common/listeners.h"

#include <utility>
#include <vector>

namespace codeco {

int Listeners::Add(std::function<void()> listener) {
  auto entry = std::make_shared<Entry>();
  entry->run = std::move(listener);
  absl::MutexLock lock(&mu_);
  const int id = next_id_++;
  entries_[id] = std::move(entry);
  return id;
}

void Listeners::Remove(int id) {
  std::shared_ptr<Entry> entry;
  {
    absl::MutexLock lock(&mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    entry = std::move(it->second);
    entries_.erase(it);
  }
  // Waits for a Notify running the listener; any Notify still holding a copy
  // of the entry sees `removed` and skips it.
  absl::MutexLock running(&entry->mu);
  entry->removed = true;
}

void Listeners::Notify(const std::function<void()>& between) {
  std::vector<std::shared_ptr<Entry>> copied;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, entry] : entries_) copied.push_back(entry);
  }
  if (between) between();
  for (auto& entry : copied) {
    absl::MutexLock running(&entry->mu);
    if (!entry->removed) entry->run();
  }
}

}  // namespace codeco
