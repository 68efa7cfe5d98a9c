#pragma once
// `codecoctl get scores`: PDLC's node and cluster scores per performance
// profile, with the breach advisories behind them.

#include "cli.h"

namespace codeco::ctl {

/// `codecoctl get scores [--profile P] [--cluster NAME] [--pdlc ADDR] [-o json]`:
/// asks every cluster's PDLC that `codecoctl up` started (or one) for its
/// recommendation under profile P (latency, greenness, resilience, cost;
/// default latency) and prints the node scores, cluster scores and advisories.
int RunGetScores(const Args& args);

}  // namespace codeco::ctl
