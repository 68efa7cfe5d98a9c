#include "codeco/common/clock.h"

#include <cstdlib>
#include <iostream>

namespace codeco {

RealClock& RealClock::Default() {
  static RealClock* clock = new RealClock();
  return *clock;
}

absl::Time SimulatedClock::Now() const {
  absl::MutexLock lock(&mu_);
  return now_;
}

void SimulatedClock::Advance(absl::Duration delta) {
  if (delta < absl::ZeroDuration()) {
    std::cerr << "SimulatedClock::Advance: negative delta" << std::endl;
    std::abort();
  }
  absl::MutexLock lock(&mu_);
  now_ += delta;
}

void SimulatedClock::SetTime(absl::Time t) {
  absl::MutexLock lock(&mu_);
  if (t < now_) {
    std::cerr << "SimulatedClock::SetTime: time may not go backwards" << std::endl;
    std::abort();
  }
  now_ = t;
}

}  // namespace codeco
