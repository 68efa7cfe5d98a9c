#pragma once
// TelemetryStore on the KvStore port, column family "telemetry".
//
// Key layout. <kind> is one byte ('n' node, 'p' pod, 'l' link); <series> is
// <kind><subject>0x00<metric> (names never hold 0x00, so one subject's keys
// never interleave with another's whose name it prefixes); <t> is a time or a
// bucket start as 8 bytes big-endian (times are >= 0), so a time range of one
// series is one range scan:
//   'R' <series> 0x00 <t>  -> 0x01 + value (f64, 8 bytes big-endian)          raw sample
//   'D' <series> 0x00 <t>  -> 0x01 + count (u32) + sum, min, max (f64 each)    5-minute bucket
//   'X' <series> 0x00 <t>  -> ""   bucket to recompute: a late raw sample fell in it after it
//                                  was folded
//   'S' <series>           -> 0x01 + fold watermark (i64): the series index (ListSubjects);
//                                  buckets starting before the watermark are folded
//   'B' <batch id>         -> 0x01 + newest sample time (i64) + sample count (u32)
//   'M' "raw_cutoff"       -> 0x01 + raw cut-off (i64): raw samples before it were dropped
// The leading byte of a value is the record version; integers are big-endian.
//
// Writes: an appended batch (samples, index entries, recompute marks and the
// batch record) is one KvWriteBatch, so a batch is stored whole or not at
// all and its id with it. ApplyRetention writes in chunks and orders its
// steps so that a run cut short is completed by the next (see the .cc).

#include <memory>

#include "absl/status/statusor.h"
#include "codeco/common/kv_store.h"
#include "pdlc/core/telemetry.h"

namespace codeco::pdlc {

/// Column family of the store.
inline constexpr char kTelemetryColumnFamily[] = "telemetry";

/// How a KvTelemetryStore bounds its work.
struct KvTelemetryStoreOptions {
  /// What Append accepts (names, batch size). Default: TelemetryLimits{}.
  TelemetryLimits limits;
  /// Most samples or buckets one read returns; more is RESOURCE_EXHAUSTED.
  /// Default 1 000 000 (16 MB of TimedValue).
  size_t max_read_points = 1'000'000;
  /// Most mutations in one write batch of ApplyRetention. Default 10 000.
  size_t retention_batch_mutations = 10'000;
};

/// A TelemetryStore over `store` (not owned, outliving the result), which
/// must have the "telemetry" column family; FAILED_PRECONDITION when it does
/// not, INVALID_ARGUMENT for zero limits.
absl::StatusOr<std::unique_ptr<TelemetryStore>> NewKvTelemetryStore(
    KvStore& store, const KvTelemetryStoreOptions& options = {});

}  // namespace codeco::pdlc
