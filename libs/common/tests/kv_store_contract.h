#pragma once
// The behaviour every KvStore implementation shares (in-memory, RocksDB,
// etcd), checked with Catch2 assertions by each implementation's test.

#include <string>
#include <utility>
#include <vector>

#include "codeco/common/kv_store.h"

namespace codeco::testing {

/// Every entry `options` selects in `cf`, in scan order (fails the test when
/// the scan fails).
std::vector<std::pair<std::string, std::string>> ScanAll(const KvStore& store,
                                                         const std::string& cf,
                                                         const KvScanOptions& options);

/// Puts, gets, scans with prefixes, resumption and limits, atomic batches,
/// family listing and binary values, on a store with families "apps" and
/// "clusters" that starts empty.
void CheckStoreContract(KvStore& store);

}  // namespace codeco::testing
