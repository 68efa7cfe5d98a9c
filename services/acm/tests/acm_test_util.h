#pragma once
// Helpers shared by the ACM tests (and codecoctl's, which run against ACM).

#include <chrono>
#include <string>

#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace codeco::acm::testing {

/// A valid one-service CodecoApp called `name`; its image tag is `tag`, so
/// two tags make two different specs.
inline std::string SmallCam(const std::string& name, const std::string& tag = "1") {
  return absl::StrReplaceAll(R"(apiVersion: codeco.he-codeco.eu/v1alpha1
kind: CodecoApp
metadata: {name: NAME}
spec:
  appName: NAME
  codecoapp-msspec:
    - serviceName: web
      podspec:
        containers: [{name: web, image: "registry.example.org/web:TAG"}]
)",
                             {{"NAME", name}, {"TAG", tag}});
}

/// A gRPC deadline `d` from now.
inline std::chrono::system_clock::time_point In(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}

}  // namespace codeco::acm::testing
