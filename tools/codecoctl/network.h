#pragma once
// `codecoctl get costmap|links`: the federation's measured network.

#include "absl/status/statusor.h"
#include "cli.h"
#include "codeco/netma/v1/netma_service.grpc.pb.h"

namespace codeco::ctl {

/// Every link `netma` measures, all pages of ListLinks in one answer (its
/// local_node from the last page); each call under `args`' --timeout, else
/// `per_call`. The first failed call's status otherwise.
absl::StatusOr<codeco::netma::v1::ListLinksResponse> ListAllLinks(
    codeco::netma::v1::NetmaService::Stub& netma, const Args& args, absl::Duration per_call);

/// `codecoctl get costmap [--metric M] [-o json]` and `codecoctl get links`,
/// from the hub NetMA `codecoctl up` started (--cluster NAME: that cluster's;
/// --netma ADDR: any NetMA).
int RunGetNetwork(const Args& args);

}  // namespace codeco::ctl
