#include "codeco/common/etcd_kv_store.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace codeco {
namespace {

// Debian's Abseil has a string_view of its own.
absl::string_view A(std::string_view v) { return absl::string_view(v.data(), v.size()); }

class EtcdKvStore final : public KvStore {
 public:
  EtcdKvStore(std::shared_ptr<EtcdClient> client, EtcdKvStoreOptions options)
      : client_(std::move(client)), options_(std::move(options)) {
    families_.push_back("default");
    for (const std::string& family : options_.column_families) {
      if (std::find(families_.begin(), families_.end(), family) == families_.end()) {
        families_.push_back(family);
      }
    }
  }

  absl::StatusOr<std::string> Get(std::string_view column_family,
                                  std::string_view key) const override {
    if (!HasFamily(column_family)) return UnknownFamily(column_family);
    etcdserverpb::RangeRequest request;
    request.set_key(FullKey(column_family, key));
    absl::StatusOr<etcdserverpb::RangeResponse> response = client_->Range(request);
    if (!response.ok()) return response.status();
    if (response->kvs_size() == 0) {
      return absl::NotFoundError(absl::StrCat(A(column_family), "/", A(key), " not found"));
    }
    return std::move(*response->mutable_kvs(0)->mutable_value());
  }

  absl::Status Write(const KvWriteBatch& batch) override {
    if (batch.empty()) return absl::OkStatus();
    // etcd refuses a transaction that names a key twice, so only the last
    // mutation of each key goes out: the batch's outcome is the same.
    absl::flat_hash_map<std::string, size_t> last_by_key;
    const std::vector<KvMutation>& mutations = batch.mutations();
    for (size_t i = 0; i < mutations.size(); ++i) {
      const KvMutation& mutation = mutations[i];
      if (!HasFamily(mutation.column_family)) return UnknownFamily(mutation.column_family);
      last_by_key[FullKey(mutation.column_family, mutation.key)] = i;
    }
    std::vector<std::pair<size_t, std::string>> ordered;
    ordered.reserve(last_by_key.size());
    for (auto& [key, index] : last_by_key) ordered.emplace_back(index, key);
    std::sort(ordered.begin(), ordered.end());

    etcdserverpb::TxnRequest txn;
    if (!options_.fence.key.empty()) {
      etcdserverpb::Compare* compare = txn.add_compare();
      compare->set_key(options_.fence.key);
      compare->set_target(etcdserverpb::Compare::CREATE);
      compare->set_result(etcdserverpb::Compare::EQUAL);
      compare->set_create_revision(options_.fence.create_revision);
    }
    for (auto& [index, key] : ordered) {
      const KvMutation& mutation = mutations[index];
      etcdserverpb::RequestOp* op = txn.add_success();
      if (mutation.is_delete) {
        op->mutable_request_delete_range()->set_key(std::move(key));
      } else {
        etcdserverpb::PutRequest* put = op->mutable_request_put();
        put->set_key(std::move(key));
        put->set_value(mutation.value);
      }
    }
    absl::StatusOr<etcdserverpb::TxnResponse> response = client_->Txn(txn);
    if (!response.ok()) {
      const absl::string_view message = response.status().message();
      if (absl::StrContains(message, "too many operations")) {
        return absl::Status(response.status().code(),
                            absl::StrCat("a batch of ", txn.success_size(),
                                         " keys is more than etcd takes in one transaction; "
                                         "raise its --max-txn-ops (",
                                         message, ")"));
      }
      if (absl::StrContains(message, "request is too large")) {
        return absl::Status(response.status().code(),
                            absl::StrCat("a batch of ", txn.ByteSizeLong(),
                                         " bytes is more than etcd takes in one request; "
                                         "raise its --max-request-bytes (",
                                         message, ")"));
      }
      return response.status();
    }
    if (!response->succeeded()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "write refused: this replica no longer holds ", options_.fence.key,
          " (created at revision ", options_.fence.create_revision, "); another replica leads"));
    }
    return absl::OkStatus();
  }

  absl::Status Scan(std::string_view column_family, const KvScanOptions& options,
                    const KvVisitor& visitor) const override {
    if (!HasFamily(column_family)) return UnknownFamily(column_family);
    const std::string family_prefix = FullKey(column_family, "");
    const std::string range_prefix = family_prefix + options.prefix;
    std::string start = range_prefix;
    if (!options.start_after.empty()) {
      // Strictly after start_after: its successor is the key with a 0 byte
      // appended.
      std::string after = family_prefix + options.start_after;
      after.push_back('\0');
      start = std::max(start, after);
    }
    const std::string end = EtcdPrefixEnd(range_prefix);
    size_t visited = 0;
    int64_t revision = 0;  // Pinned after the first page: one consistent view.
    while (true) {
      etcdserverpb::RangeRequest request;
      request.set_key(start);
      request.set_range_end(end);
      int64_t page = options_.scan_page;
      if (options.limit > 0) page = std::min<int64_t>(page, options.limit - visited);
      request.set_limit(page);
      request.set_revision(revision);
      absl::StatusOr<etcdserverpb::RangeResponse> response = client_->Range(request);
      if (!response.ok()) return response.status();
      revision = response->header().revision();
      for (const etcdserverpb::KeyValue& kv : response->kvs()) {
        std::string_view key = kv.key();
        key.remove_prefix(family_prefix.size());
        ++visited;
        if (!visitor(key, kv.value())) return absl::OkStatus();
        if (options.limit > 0 && visited >= options.limit) return absl::OkStatus();
      }
      if (!response->more() || response->kvs_size() == 0) return absl::OkStatus();
      start = response->kvs(response->kvs_size() - 1).key();
      start.push_back('\0');
    }
  }

  std::vector<std::string> ColumnFamilies() const override { return families_; }

 private:
  bool HasFamily(std::string_view family) const {
    return std::find(families_.begin(), families_.end(), family) != families_.end();
  }
  static absl::Status UnknownFamily(std::string_view family) {
    return absl::InvalidArgumentError(absl::StrCat("unknown column family \"", A(family), "\""));
  }
  std::string FullKey(std::string_view family, std::string_view key) const {
    return absl::StrCat(options_.prefix, A(family), "/", A(key));
  }

  std::shared_ptr<EtcdClient> client_;
  EtcdKvStoreOptions options_;
  std::vector<std::string> families_;
};

}  // namespace

std::string EtcdPrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    unsigned char last = static_cast<unsigned char>(end.back());
    if (last < 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

absl::StatusOr<std::unique_ptr<KvStore>> OpenEtcdKvStore(std::shared_ptr<EtcdClient> client,
                                                         const EtcdKvStoreOptions& options) {
  if (client == nullptr) return absl::InvalidArgumentError("etcd store: no client");
  if (options.prefix.empty() || options.prefix.back() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("store.etcd.prefix: must end with '/', not \"", options.prefix, "\""));
  }
  for (const std::string& family : options.column_families) {
    if (family.empty() || family.find('/') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd store: column family \"", family, "\" must be non-empty without '/'"));
    }
  }
  if (options.scan_page < 1) return absl::InvalidArgumentError("etcd store: scan_page < 1");
  return std::unique_ptr<KvStore>(new EtcdKvStore(std::move(client), options));
}

}  // namespace codeco
