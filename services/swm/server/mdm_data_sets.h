#pragma once
// DataSetLocator on an MDM (docs/mdm.md): data set NAME is the entity
// "DataSet/NAME", and its `clusters` property lists the clusters holding it.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "swm/core/plugins.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace codeco::swm {

/// Reads data sets from the MDM behind a channel, each call bounded by a
/// timeout. Thread-safe.
class MdmDataSets final : public DataSetLocator {
 public:
  /// Asks the MDM behind `channel`, each call bounded by `timeout`.
  MdmDataSets(std::shared_ptr<grpc::Channel> channel, absl::Duration timeout);
  absl::StatusOr<std::optional<std::vector<std::string>>> ClustersHolding(
      const std::string& name) override;

 private:
  std::shared_ptr<grpc::Channel> channel_;
  absl::Duration timeout_;
};

}  // namespace codeco::swm
