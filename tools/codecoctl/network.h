#pragma once
// `codecoctl get costmap|links`: the federation's measured network.

#include "cli.h"

namespace codeco::ctl {

/// `codecoctl get costmap [--metric M] [-o json]` and `codecoctl get links`,
/// from the hub NetMA `codecoctl up` started (--cluster NAME: that cluster's;
/// --netma ADDR: any NetMA).
int RunGetNetwork(const Args& args);

}  // namespace codeco::ctl
