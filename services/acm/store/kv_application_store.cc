#include "acm/store/kv_application_store.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "codeco/common/status.h"

namespace codeco::acm {
namespace {

constexpr char kApplications[] = "applications";
constexpr char kRevisions[] = "application_revisions";
constexpr char kEvents[] = "application_events";
constexpr char kRequests[] = "application_requests";
constexpr char kOperations[] = "application_operations";
constexpr char kDefault[] = "default";
constexpr char kLastRevisionKey[] = "acm/last_revision";

std::string Padded(int64_t n) { return absl::StrFormat("%020d", n); }
std::string RevisionKey(const std::string& name, int64_t spec_revision) {
  return absl::StrCat(name, "/", Padded(spec_revision));
}

template <typename Message>
absl::StatusOr<Message> Decode(std::string_view bytes, std::string_view what) {
  Message m;
  if (!m.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::DataLossError(absl::StrCat("corrupt ", std::string(what), " record"));
  }
  return m;
}

}  // namespace

std::vector<std::string> ApplicationColumnFamilies() {
  return {kApplications, kRevisions, kEvents, kRequests, kOperations};
}

KvApplicationStore::KvApplicationStore(KvStore& kv, KvApplicationStoreOptions options)
    : kv_(kv), options_(options) {}

absl::StatusOr<std::optional<v1::Application>> KvApplicationStore::Get(
    const std::string& name) const {
  absl::StatusOr<std::string> bytes = kv_.Get(kApplications, name);
  if (absl::IsNotFound(bytes.status())) return std::optional<v1::Application>();
  RETURN_IF_ERROR(bytes.status());
  ASSIGN_OR_RETURN(v1::Application app, Decode<v1::Application>(*bytes, "application"));
  return std::optional<v1::Application>(std::move(app));
}

absl::Status KvApplicationStore::List(
    const std::string& start_after,
    const std::function<bool(const v1::Application&)>& visitor) const {
  absl::Status decode_error;
  RETURN_IF_ERROR(kv_.Scan(
      kApplications, {.start_after = start_after}, [&](std::string_view, std::string_view value) {
        absl::StatusOr<v1::Application> app = Decode<v1::Application>(value, "application");
        if (!app.ok()) {
          decode_error = app.status();
          return false;
        }
        return visitor(*app);
      }));
  return decode_error;
}

absl::StatusOr<v1::ApplicationRevision> KvApplicationStore::GetSpecRevision(
    const std::string& name, int64_t spec_revision) const {
  ASSIGN_OR_RETURN(std::string bytes, kv_.Get(kRevisions, RevisionKey(name, spec_revision)));
  return Decode<v1::ApplicationRevision>(bytes, "application revision");
}

absl::StatusOr<std::vector<v1::ApplicationRevision>> KvApplicationStore::ListSpecRevisions(
    const std::string& name) const {
  std::vector<v1::ApplicationRevision> out;
  absl::Status decode_error;
  RETURN_IF_ERROR(
      kv_.Scan(kRevisions, {.prefix = name + "/"}, [&](std::string_view, std::string_view value) {
        auto rev = Decode<v1::ApplicationRevision>(value, "revision");
        if (!rev.ok()) {
          decode_error = rev.status();
          return false;
        }
        out.push_back(*std::move(rev));
        return true;
      }));
  RETURN_IF_ERROR(decode_error);
  return out;
}

absl::StatusOr<std::optional<StoredRequest>> KvApplicationStore::GetRequest(
    const std::string& key) const {
  absl::StatusOr<std::string> fingerprint = kv_.Get(kRequests, "f/" + key);
  if (absl::IsNotFound(fingerprint.status())) return std::optional<StoredRequest>();
  RETURN_IF_ERROR(fingerprint.status());
  ASSIGN_OR_RETURN(std::string response, kv_.Get(kRequests, "r/" + key));
  return std::optional<StoredRequest>(StoredRequest{*std::move(fingerprint), std::move(response)});
}

absl::StatusOr<int64_t> KvApplicationStore::LastRevision() const {
  absl::StatusOr<std::string> text = kv_.Get(kDefault, kLastRevisionKey);
  if (absl::IsNotFound(text.status())) return 0;
  RETURN_IF_ERROR(text.status());
  int64_t revision = 0;
  if (!absl::SimpleAtoi(*text, &revision)) return absl::DataLossError("corrupt last revision");
  return revision;
}

absl::StatusOr<int64_t> KvApplicationStore::OldestEventRevision() const {
  ASSIGN_OR_RETURN(int64_t last, LastRevision());
  return std::max<int64_t>(1, last - options_.max_events + 1);
}

absl::Status KvApplicationStore::ReadEvents(
    int64_t after, const std::function<bool(const v1::WatchApplicationResponse&)>& visitor) const {
  absl::Status decode_error;
  RETURN_IF_ERROR(kv_.Scan(kEvents, {.start_after = Padded(after)},
                           [&](std::string_view, std::string_view value) {
                             auto event = Decode<v1::WatchApplicationResponse>(value, "event");
                             if (!event.ok()) {
                               decode_error = event.status();
                               return false;
                             }
                             return visitor(*event);
                           }));
  return decode_error;
}

absl::Status KvApplicationStore::Commit(const ApplicationCommit& commit) {
  ASSIGN_OR_RETURN(int64_t last, LastRevision());
  if (commit.revision != last + 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("commit revision ", commit.revision, " does not follow ", last));
  }
  KvWriteBatch batch;
  if (commit.put) {
    batch.Put(kApplications, commit.put->metadata().name(), commit.put->SerializeAsString());
  }
  if (commit.erase) {
    batch.Delete(kApplications, *commit.erase);
    ASSIGN_OR_RETURN(std::vector<v1::ApplicationRevision> revs, ListSpecRevisions(*commit.erase));
    for (const auto& rev : revs)
      batch.Delete(kRevisions, RevisionKey(*commit.erase, rev.spec_revision()));
  }
  if (commit.spec_revision) {
    const std::string& name = commit.put ? commit.put->metadata().name() : "";
    if (name.empty()) return absl::InternalError("a spec revision needs the application put");
    batch.Put(kRevisions, RevisionKey(name, commit.spec_revision->spec_revision()),
              commit.spec_revision->SerializeAsString());
  }
  batch.Put(kEvents, Padded(commit.revision), commit.event.SerializeAsString());
  int64_t expired = commit.revision - options_.max_events;
  if (expired >= 1) batch.Delete(kEvents, Padded(expired));
  if (commit.request) {
    batch.Put(kRequests, "f/" + commit.request->first, commit.request->second.fingerprint);
    batch.Put(kRequests, "r/" + commit.request->first, commit.request->second.response);
  }
  for (const auto& op : commit.operations) {
    if (op.id().empty()) return absl::InternalError("an operation needs an id");
    batch.Put(kOperations, op.id(), op.SerializeAsString());
  }
  batch.Put(kDefault, kLastRevisionKey, absl::StrCat(commit.revision));
  return kv_.Write(batch);
}

absl::StatusOr<std::optional<common::v1::Operation>> KvApplicationStore::GetOperation(
    const std::string& id) const {
  absl::StatusOr<std::string> bytes = kv_.Get(kOperations, id);
  if (absl::IsNotFound(bytes.status())) return std::optional<common::v1::Operation>();
  RETURN_IF_ERROR(bytes.status());
  ASSIGN_OR_RETURN(common::v1::Operation op, Decode<common::v1::Operation>(*bytes, "operation"));
  return std::optional<common::v1::Operation>(std::move(op));
}

absl::Status KvApplicationStore::ListOperations(
    const std::function<bool(const common::v1::Operation&)>& visitor) const {
  absl::Status decode_error;
  RETURN_IF_ERROR(kv_.Scan(kOperations, {}, [&](std::string_view, std::string_view value) {
    auto op = Decode<common::v1::Operation>(value, "operation");
    if (!op.ok()) {
      decode_error = op.status();
      return false;
    }
    return visitor(*op);
  }));
  return decode_error;
}

absl::Status KvApplicationStore::DeleteOperations(const std::vector<std::string>& ids) {
  if (ids.empty()) return absl::OkStatus();
  KvWriteBatch batch;
  for (const auto& id : ids) batch.Delete(kOperations, id);
  return kv_.Write(batch);
}

absl::Status KvApplicationStore::PutOperation(const common::v1::Operation& operation) {
  if (operation.id().empty()) return InvalidFieldError("operation.id", "required");
  KvWriteBatch batch;
  batch.Put(kOperations, operation.id(), operation.SerializeAsString());
  return kv_.Write(batch);
}

}  // namespace codeco::acm
