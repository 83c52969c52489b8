#include "job.h"

namespace cactus::server {

bool Job::take(std::vector<GenEvent>* out, std::chrono::milliseconds wait) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (events_.empty() && !ready_.wait_for(lock, wait, [&] { return !events_.empty(); })) return false;
    while (!events_.empty()) {
        out->push_back(std::move(events_.front()));
        events_.pop_front();
    }
    return true;
}

void Job::push(GenEvent event) {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        events_.push_back(std::move(event));
    }
    ready_.notify_all();
}

}  // namespace cactus::server
