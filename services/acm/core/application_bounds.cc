#include "acm/core/application_bounds.h"

#include <cstdint>
#include <string_view>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "codeco/common/status.h"

namespace codeco::acm {
namespace {

std::string Child(const std::string& path, const std::string& key) {
  return key.empty() ? path : absl::StrCat(path, ".", key);
}
std::string Index(const std::string& path, int i) { return absl::StrCat(path, "[", i, "]"); }

// Adds `replicas` x `quantity` of one resource to `*total`; false on overflow.
bool AddScaled(int64_t replicas, int64_t quantity, int64_t* total) {
  int64_t product = 0;
  if (__builtin_mul_overflow(replicas, quantity, &product)) return false;
  return !__builtin_add_overflow(*total, product, total);
}

}  // namespace

SpecFieldNames ProtoSpecFieldNames(const std::string& root) {
  SpecFieldNames names;
  names.services = root + ".services";
  names.service = [services = names.services](int i) {
    return absl::StrCat(services, "[", i, "]");
  };
  return names;
}

absl::StatusOr<ApplicationTotals> CheckApplicationBounds(const v1::ApplicationSpec& spec,
                                                         const SpecFieldNames& names) {
  FieldErrors errors;
  ApplicationTotals totals;
  // Effective replicas of each service with a valid count.
  std::unordered_map<std::string_view, int64_t> replicas_of;
  struct Resource {
    const char* field;
    const char* what;
    int64_t (common::v1::ResourceQuantities::*get)() const;
    int64_t ApplicationTotals::*total;
    bool overflowed = false;
  };
  Resource resources[] = {
      {"cpu_millicores", "CPU millicores", &common::v1::ResourceQuantities::cpu_millicores,
       &ApplicationTotals::cpu_millicores},
      {"memory_bytes", "memory bytes", &common::v1::ResourceQuantities::memory_bytes,
       &ApplicationTotals::memory_bytes},
      {"gpu", "GPUs", &common::v1::ResourceQuantities::gpu, &ApplicationTotals::gpu},
  };
  for (int i = 0; i < spec.services_size(); ++i) {
    const v1::ServiceSpec& s = spec.services(i);
    const std::string path = names.service(i);
    for (const Resource& r : resources) {
      if ((s.requests().*r.get)() < 0) {
        errors.Add(Child(Child(path, names.requests), r.field), "must not be negative");
      }
    }
    if (s.replicas() < 0 || s.replicas() > kMaxServiceReplicas) {
      errors.Add(Child(path, names.replicas),
                 absl::StrCat("must be between 0 and ", kMaxServiceReplicas, ", got ",
                              s.replicas()));
      continue;
    }
    if (s.has_autoscaling() && (s.autoscaling().max_replicas() < 0 ||
                                s.autoscaling().max_replicas() > kMaxServiceReplicas)) {
      errors.Add(Child(path, names.autoscaling_max),
                 absl::StrCat("must be between 0 and ", kMaxServiceReplicas, ", got ",
                              s.autoscaling().max_replicas()));
    }
    const int64_t replicas = s.replicas() == 0 ? 1 : s.replicas();
    replicas_of.emplace(s.name(), replicas);
    totals.workloads += replicas;  // at most kMaxServiceReplicas per service: no overflow
    for (Resource& r : resources) {
      const int64_t q = (s.requests().*r.get)();
      if (q < 0 || r.overflowed) continue;
      if (!AddScaled(replicas, q, &(totals.*r.total))) {
        r.overflowed = true;
        errors.Add(Child(path, names.replicas),
                   absl::StrCat(replicas, " replicas of ", q, " ", r.what,
                                " take the application's total past the largest value (",
                                INT64_MAX, ")"));
      }
    }
  }
  if (totals.workloads > kMaxApplicationWorkloads) {
    errors.Add(names.services,
               absl::StrCat("the replicas add up to ", totals.workloads,
                            " workloads, more than ", kMaxApplicationWorkloads));
  }
  bool channels_reported = false;
  for (int i = 0; i < spec.services_size() && !channels_reported; ++i) {
    const v1::ServiceSpec& s = spec.services(i);
    auto from = replicas_of.find(s.name());
    if (from == replicas_of.end()) continue;
    for (int k = 0; k < s.channels_size(); ++k) {
      auto to = replicas_of.find(s.channels(k).to_service());
      if (to == replicas_of.end()) continue;
      const int64_t pairs = from->second * to->second;  // both at most kMaxServiceReplicas
      totals.channels += pairs;
      if (totals.channels > kMaxApplicationChannels) {
        errors.Add(Index(Child(names.service(i), names.channels), k),
                   absl::StrCat("expands to ", from->second, " x ", to->second, " = ", pairs,
                                " channels (one per sender and receiver replica), taking the "
                                "application past ",
                                kMaxApplicationChannels, " channels"));
        channels_reported = true;
        break;
      }
    }
  }
  RETURN_IF_ERROR(errors.ToStatus());
  return totals;
}

}  // namespace codeco::acm
