#include "netma/store/kv_virtual_link_repository.h"

#include "absl/strings/str_cat.h"
#include "codeco/common/status.h"

namespace codeco::netma {
namespace {

using codeco::netma::v1::VirtualLink;

constexpr char kVersion = '\x01';
constexpr char kLinkPrefix[] = "link/";

absl::StatusOr<VirtualLink> Decode(std::string_view value, std::string_view key) {
  VirtualLink link;
  if (value.empty() || value[0] != kVersion ||
      !link.ParseFromArray(value.data() + 1, static_cast<int>(value.size() - 1))) {
    return absl::DataLossError(absl::StrCat("virtual_links: cannot decode ", std::string(key)));
  }
  return link;
}

class KvVirtualLinkRepository final : public VirtualLinkRepository {
 public:
  explicit KvVirtualLinkRepository(KvStore& store) : store_(store) {}

  absl::StatusOr<std::optional<VirtualLink>> Get(const std::string& id) const override {
    std::string key = kLinkPrefix + id;
    absl::StatusOr<std::string> value = store_.Get(kVirtualLinksColumnFamily, key);
    if (absl::IsNotFound(value.status())) return std::optional<VirtualLink>();
    if (!value.ok()) return value.status();
    ASSIGN_OR_RETURN(VirtualLink link, Decode(*value, key));
    return std::optional<VirtualLink>(std::move(link));
  }

  absl::StatusOr<std::optional<std::string>> FindByRequestId(
      const std::string& request_id) const override {
    absl::StatusOr<std::string> value = store_.Get(kVirtualLinksColumnFamily, "req/" + request_id);
    if (absl::IsNotFound(value.status())) return std::optional<std::string>();
    if (!value.ok()) return value.status();
    return std::optional<std::string>(*value);
  }

  absl::Status Put(const VirtualLink& link, const std::string& request_id) override {
    KvWriteBatch batch;
    batch.Put(kVirtualLinksColumnFamily, kLinkPrefix + link.id(), Encode(link));
    if (!request_id.empty()) {
      batch.Put(kVirtualLinksColumnFamily, "req/" + request_id, link.id());
      batch.Put(kVirtualLinksColumnFamily, "reqof/" + link.id(), request_id);
    }
    return store_.Write(batch);
  }

  absl::Status PutAll(const std::vector<VirtualLink>& links) override {
    KvWriteBatch batch;
    for (const VirtualLink& link : links) {
      batch.Put(kVirtualLinksColumnFamily, kLinkPrefix + link.id(), Encode(link));
    }
    return store_.Write(batch);
  }

  absl::Status Delete(const std::string& id) override {
    KvWriteBatch batch;
    batch.Delete(kVirtualLinksColumnFamily, kLinkPrefix + id);
    absl::StatusOr<std::string> request_id = store_.Get(kVirtualLinksColumnFamily, "reqof/" + id);
    if (request_id.ok()) {
      batch.Delete(kVirtualLinksColumnFamily, "req/" + *request_id);
      batch.Delete(kVirtualLinksColumnFamily, "reqof/" + id);
    } else if (!absl::IsNotFound(request_id.status())) {
      return request_id.status();
    }
    return store_.Write(batch);
  }

  absl::StatusOr<std::vector<VirtualLink>> List(const std::string& start_after,
                                                size_t limit) const override {
    std::vector<VirtualLink> out;
    absl::Status decode_error;
    KvScanOptions options;
    options.prefix = kLinkPrefix;
    if (!start_after.empty()) options.start_after = kLinkPrefix + start_after;
    options.limit = limit;
    RETURN_IF_ERROR(store_.Scan(kVirtualLinksColumnFamily, options,
                                [&](std::string_view key, std::string_view value) {
                                  absl::StatusOr<VirtualLink> link = Decode(value, key);
                                  if (!link.ok()) {
                                    decode_error = link.status();
                                    return false;
                                  }
                                  out.push_back(std::move(*link));
                                  return true;
                                }));
    RETURN_IF_ERROR(decode_error);
    return out;
  }

 private:
  static std::string Encode(const VirtualLink& link) {
    std::string out(1, kVersion);
    link.AppendToString(&out);
    return out;
  }

  KvStore& store_;
};

}  // namespace

std::unique_ptr<VirtualLinkRepository> NewKvVirtualLinkRepository(KvStore& store) {
  return std::make_unique<KvVirtualLinkRepository>(store);
}

}  // namespace codeco::netma
