#pragma once
// Samples an emulated federation into CSV rows, one table per metric family
// a scenario's `record.metrics` asks for:
//   node_usage.csv       time_s,cluster,node,cpu_millicores,memory_bytes,cpu_utilization,
//                        cpu_requested_millicores,cpu_allocatable_millicores
//   node_energy.csv      time_s,cluster,node,watts
//   pod_phases.csv       time_s,cluster,pending,running,succeeded,failed
//   pending_pods.csv     time_s,pending,unplaced,placed,unplaced_cpu_millicores,
//                        placed_cpu_millicores   (over the whole federation)
//   link_conditions.csv  time_s,from,to,one_way_latency_ns,bandwidth_bps,loss,cut
//   placement.csv        time_s,cluster,node,pod,phase
// In pending_pods.csv, `unplaced` are pods a scheduler holds without a node
// (told by the caller: simulate mode's queue; 0 in emulate mode), `placed`
// the pods bound to a node that have not finished (Pending or Running), and
// `pending` every pod not running yet (unplaced + bound but Pending).
// Pure: the caller decides when to sample and where the text goes.

#include <cstdint>
#include <map>
#include <string>

#include "absl/time/time.h"
#include "federation.h"
#include "scenario.h"

namespace codeco::codef {

/// Pods waiting for a node outside any LMS (a scheduler's queue).
struct UnplacedPods {
  /// How many.
  int64_t count = 0;
  /// Their CPU requests, millicores.
  int64_t cpu_millicores = 0;
};

/// Turns samples of a federation into CSV text.
class Recorder {
 public:
  /// Records `spec.metrics` of `federation` (not owned; must outlive this).
  Recorder(const RecordSpec& spec, Federation* federation);

  /// Samples at `now`, with time measured from `start`. Returns, per file
  /// name ("node_usage.csv"), the text to append: the header line on the
  /// first call, then one line per row. `unplaced` counts in pending_pods.csv.
  std::map<std::string, std::string> Sample(absl::Time now, absl::Time start,
                                            const UnplacedPods& unplaced = {});

 private:
  RecordSpec spec_;
  Federation* federation_;
  bool headers_written_ = false;
};

}  // namespace codeco::codef
