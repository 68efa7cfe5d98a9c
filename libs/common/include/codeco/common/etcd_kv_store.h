#pragma once
// KvStore on etcd's v3 API, for a hub whose state must outlive one machine:
// each column family is a key range under a prefix, a write batch is one etcd
// transaction, and reads are linearizable (served through the etcd leader).
//
// Durability: a Write that returned OK is committed by a majority of etcd's
// members (each fsyncs its WAL before answering), so it survives SIGKILL of
// the service and the loss of any minority of members.
//
// Fencing: with a fence, every write also requires that the fence key (the
// leader key this replica holds, leader_election.h) still exists at the
// create revision this replica saw; a replica that lost leadership can then
// write nothing, even before it notices.
//
// Layout: `<prefix><family>/<key>`. etcd limits a transaction to
// --max-txn-ops operations (128 by default) and a request to
// --max-request-bytes (1.5 MiB); a larger batch is refused whole, with an
// error that says which limit to raise.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "codeco/common/etcd_client.h"
#include "codeco/common/kv_store.h"

namespace codeco {

/// Guards writes with a key this process holds.
struct EtcdFence {
  /// The key that must still exist; empty: no fence.
  std::string key;
  /// The create revision it must still have (a new holder recreates it).
  int64_t create_revision = 0;
};

/// How to open an EtcdKvStore.
struct EtcdKvStoreOptions {
  /// Key prefix of this store, e.g. "/codeco/hub/acm/"; must end with '/'.
  /// Required.
  std::string prefix;
  /// Column families besides "default"; names must not contain '/'.
  std::vector<std::string> column_families;
  /// Guard for every write (empty key: none).
  EtcdFence fence;
  /// Keys fetched per Range call while scanning. Default: 512.
  int64_t scan_page = 512;
};

/// A KvStore over `client` (shared: a leader election may use it too).
/// INVALID_ARGUMENT for a bad prefix or family name; nothing is contacted.
absl::StatusOr<std::unique_ptr<KvStore>> OpenEtcdKvStore(std::shared_ptr<EtcdClient> client,
                                                         const EtcdKvStoreOptions& options);

/// The end of the key range holding every key that starts with `prefix`
/// (etcd's range_end): the prefix with its last byte below 0xff incremented
/// and the rest dropped; "\0" (every key) when there is none.
std::string EtcdPrefixEnd(std::string_view prefix);

}  // namespace codeco
