#include "acm/store/kv_application_store.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "codeco/common/proto_util.h"
#include "codeco/common/status.h"

namespace codeco::acm {
namespace {

constexpr char kApplications[] = "applications";
constexpr char kRevisions[] = "application_revisions";
constexpr char kEvents[] = "application_events";
constexpr char kRequests[] = "application_requests";
constexpr char kOperations[] = "application_operations";
constexpr char kHistory[] = "application_history";
constexpr char kDefault[] = "default";
constexpr char kLastRevisionKey[] = "acm/last_revision";
constexpr char kOperationIndexBuilt[] = "acm/operation_index";
constexpr char kRequestIndexBuilt[] = "acm/request_index";
// History index prefixes (see the header): newest-first operations, done
// operations by age, idempotency records by age.
constexpr char kCreatedPrefix[] = "c/";
constexpr char kDonePrefix[] = "d/";
constexpr char kRequestPrefix[] = "q/";
// Length of each of those prefixes.
constexpr size_t kPrefixSize = 2;
// Width of a padded number in keys.
constexpr size_t kPaddedWidth = 20;
// Index entries read per scan where the store is read or written for each.
constexpr size_t kChunk = 256;
// Inverted create times count down from here, so newer sorts first.
constexpr int64_t kLatestMicros = int64_t{1} << 62;

std::string Padded(int64_t n) { return absl::StrFormat("%020d", n); }

int64_t Micros(absl::Time t) {
  return std::clamp<int64_t>(absl::ToUnixMicros(t), 0, kLatestMicros);
}
int64_t Micros(const google::protobuf::Timestamp& t) {
  return Micros(FromProtoTimestamp(t));
}
// "<prefix><µs, 20 digits>/<what>".
std::string DatedKey(const char* prefix, int64_t micros, std::string_view what) {
  return absl::StrCat(prefix, Padded(micros), "/", std::string(what));
}
// The first key past every dated key of `prefix` at or before `t`.
std::string DatedEnd(const char* prefix, absl::Time t) {
  return absl::StrCat(prefix, Padded(Micros(t) + 1));
}
// What a dated key names (after "<prefix><20 digits>/"), or "" if malformed.
std::string_view DatedWhat(std::string_view key) {
  const size_t start = kPrefixSize + kPaddedWidth + 1;
  return key.size() > start && key[start - 1] == '/' ? key.substr(start) : std::string_view();
}
std::string CreatedKey(const common::v1::Operation& op) {
  return DatedKey(kCreatedPrefix, kLatestMicros - Micros(op.create_time()), op.id());
}

// Puts the history index entries of `op` into `batch`.
void IndexOperationInto(KvWriteBatch& batch, const common::v1::Operation& op) {
  batch.Put(kHistory, CreatedKey(op), "");
  if (op.done()) batch.Put(kHistory, DatedKey(kDonePrefix, Micros(op.update_time()), op.id()), "");
}

// Puts `op` and its history index entries into `batch`.
void PutOperationInto(KvWriteBatch& batch, const common::v1::Operation& op) {
  batch.Put(kOperations, op.id(), op.SerializeAsString());
  IndexOperationInto(batch, op);
}
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
  return {kApplications, kRevisions, kEvents, kRequests, kOperations, kHistory};
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
    batch.Put(kHistory, DatedKey(kRequestPrefix, Micros(commit.time), commit.request->first), "");
  }
  for (const auto& op : commit.operations) {
    if (op.id().empty()) return absl::InternalError("an operation needs an id");
    PutOperationInto(batch, op);
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
    const std::string& start_after,
    const std::function<bool(const std::string& position, const common::v1::Operation&)>& visitor)
    const {
  RETURN_IF_ERROR(EnsureOperationIndex());
  std::string after;
  if (!start_after.empty()) {
    after = absl::StrCat(kCreatedPrefix, start_after);
    const bool dated = std::all_of(after.begin() + kPrefixSize,
                                   after.begin() + std::min(after.size(), kPrefixSize + kPaddedWidth),
                                   absl::ascii_isdigit);
    if (!dated || DatedWhat(after).empty()) {
      return absl::InvalidArgumentError("not a position ListOperations gave");
    }
  }
  // A chunk of index keys at a time: the store is not read from inside a scan.
  for (bool more = true; more;) {
    ASSIGN_OR_RETURN(std::vector<std::string> keys, IndexKeys(kCreatedPrefix, after, kChunk));
    more = keys.size() == kChunk;
    for (const std::string& key : keys) {
      ASSIGN_OR_RETURN(std::optional<common::v1::Operation> op,
                       GetOperation(std::string(DatedWhat(key))));
      // An entry whose operation has just been pruned is skipped.
      if (op.has_value() && !visitor(key.substr(kPrefixSize), *op)) return absl::OkStatus();
    }
    if (!keys.empty()) after = keys.back();
  }
  return absl::OkStatus();
}

absl::Status KvApplicationStore::PutOperation(const common::v1::Operation& operation) {
  if (operation.id().empty()) return InvalidFieldError("operation.id", "required");
  RETURN_IF_ERROR(EnsureOperationIndex());
  KvWriteBatch batch;
  PutOperationInto(batch, operation);
  return kv_.Write(batch);
}

absl::StatusOr<PrunedHistory> KvApplicationStore::PruneHistory(const HistoryPruning& pruning) {
  RETURN_IF_ERROR(EnsureOperationIndex());
  RETURN_IF_ERROR(EnsureRequestIndex(pruning.now));
  PrunedHistory out;
  KvWriteBatch batch;
  // Done operations, oldest first, up to the cut-off.
  ASSIGN_OR_RETURN(std::vector<std::string> done,
                   IndexKeys(kDonePrefix, "", pruning.max_entries + 1,
                             DatedEnd(kDonePrefix, pruning.operations_done_by)));
  if (done.size() > pruning.max_entries) {
    done.pop_back();
    out.more = true;
  }
  for (const std::string& key : done) {
    batch.Delete(kHistory, key);
    const std::string id(DatedWhat(key));
    ASSIGN_OR_RETURN(std::optional<common::v1::Operation> op, GetOperation(id));
    // Gone already, or changed since (a later entry dates it): only the entry goes.
    if (!op.has_value() || !op->done() ||
        absl::FromUnixMicros(Micros(op->update_time())) > pruning.operations_done_by) {
      continue;
    }
    if (pruning.keep && pruning.keep(*op)) {
      batch.Put(kHistory, DatedKey(kDonePrefix, Micros(pruning.now), id), "");
      continue;
    }
    batch.Delete(kOperations, id);
    batch.Delete(kHistory, CreatedKey(*op));
    ++out.operations;
  }
  // Idempotency records, oldest first, up to their cut-off.
  if (!out.more) {
    ASSIGN_OR_RETURN(std::vector<std::string> requests,
                     IndexKeys(kRequestPrefix, "", pruning.max_entries - done.size() + 1,
                               DatedEnd(kRequestPrefix, pruning.requests_done_by)));
    if (requests.size() > pruning.max_entries - done.size()) {
      requests.pop_back();
      out.more = true;
    }
    for (const std::string& key : requests) {
      const std::string_view request = DatedWhat(key);
      batch.Delete(kRequests, absl::StrCat("f/", std::string(request)));
      batch.Delete(kRequests, absl::StrCat("r/", std::string(request)));
      batch.Delete(kHistory, key);
      ++out.requests;
    }
  }
  if (!batch.empty()) RETURN_IF_ERROR(kv_.Write(batch));
  return out;
}

absl::StatusOr<std::vector<std::string>> KvApplicationStore::IndexKeys(const char* prefix,
                                                                       const std::string& after,
                                                                       size_t limit,
                                                                       const std::string& end) const {
  std::vector<std::string> keys;
  RETURN_IF_ERROR(kv_.Scan(kHistory,
                           {.prefix = std::string(prefix), .start_after = after, .limit = limit},
                           [&](std::string_view key, std::string_view) {
                             if (!end.empty() && key >= end) return false;
                             keys.emplace_back(key);
                             return true;
                           }));
  return keys;
}

absl::Status KvApplicationStore::EnsureOperationIndex() const {
  if (operations_indexed_.load(std::memory_order_acquire)) return absl::OkStatus();
  absl::StatusOr<std::string> built = kv_.Get(kDefault, kOperationIndexBuilt);
  if (!built.ok() && !absl::IsNotFound(built.status())) return built.status();
  if (absl::IsNotFound(built.status())) {
    // Older stores only: every operation once, a chunk per write.
    std::string after;
    for (bool more = true; more;) {
      std::vector<common::v1::Operation> ops;
      absl::Status failed;
      RETURN_IF_ERROR(kv_.Scan(kOperations, {.start_after = after, .limit = kChunk},
                               [&](std::string_view key, std::string_view value) {
                                 after = std::string(key);
                                 absl::StatusOr<common::v1::Operation> op =
                                     Decode<common::v1::Operation>(value, "operation");
                                 if (!op.ok()) {
                                   failed = op.status();
                                   return false;
                                 }
                                 ops.push_back(*std::move(op));
                                 return true;
                               }));
      RETURN_IF_ERROR(failed);
      more = ops.size() == kChunk;
      KvWriteBatch batch;
      for (const common::v1::Operation& op : ops) IndexOperationInto(batch, op);
      if (!more) batch.Put(kDefault, kOperationIndexBuilt, "");
      RETURN_IF_ERROR(kv_.Write(batch));
    }
  }
  operations_indexed_.store(true, std::memory_order_release);
  return absl::OkStatus();
}

absl::Status KvApplicationStore::EnsureRequestIndex(absl::Time now) {
  if (requests_indexed_.load(std::memory_order_acquire)) return absl::OkStatus();
  absl::StatusOr<std::string> built = kv_.Get(kDefault, kRequestIndexBuilt);
  if (!built.ok() && !absl::IsNotFound(built.status())) return built.status();
  if (absl::IsNotFound(built.status())) {
    // Older stores only: their records carry no date, so they are dated now.
    std::string after;
    for (bool more = true; more;) {
      KvWriteBatch batch;
      size_t seen = 0;
      RETURN_IF_ERROR(kv_.Scan(kRequests, {.prefix = "f/", .start_after = after, .limit = kChunk},
                               [&](std::string_view key, std::string_view) {
                                 after = std::string(key);
                                 ++seen;
                                 batch.Put(kHistory,
                                           DatedKey(kRequestPrefix, Micros(now), key.substr(2)),
                                           "");
                                 return true;
                               }));
      more = seen == kChunk;
      if (!more) batch.Put(kDefault, kRequestIndexBuilt, "");
      RETURN_IF_ERROR(kv_.Write(batch));
    }
  }
  requests_indexed_.store(true, std::memory_order_release);
  return absl::OkStatus();
}

}  // namespace codeco::acm
