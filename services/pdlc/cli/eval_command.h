#pragma once
// `codeco-pdlc eval`: the bring-your-own-trace evaluator. Trains every model
// (persistence, linear autoregressive, LSTM) on one trace, scores each on
// another and prints MAPE per horizon and the breach table per threshold and
// margin, as text or as JSON for machines.

#include <ostream>
#include <string>
#include <vector>

namespace codeco::pdlc {

/// Runs `codeco-pdlc eval` with `args` (the words after "eval"). Writes the
/// report to `out` and errors and usage to `err`; returns the exit code (0,
/// 1 on a failed run, 2 on a bad command line).
int RunEvalCommand(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace codeco::pdlc
