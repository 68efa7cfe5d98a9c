#include "pod_processes.h"

namespace codeco::codef {

bool IsRedisImage(absl::string_view image) {
  // [registry[:port]/]path/name[:tag][@digest]: only the last component
  // names the repository, and a colon there starts the tag.
  if (size_t at = image.find('@'); at != absl::string_view::npos) image = image.substr(0, at);
  if (size_t slash = image.rfind('/'); slash != absl::string_view::npos) {
    image = image.substr(slash + 1);
  }
  if (size_t colon = image.find(':'); colon != absl::string_view::npos) {
    image = image.substr(0, colon);
  }
  return image == "redis";
}

}  // namespace codeco::codef
