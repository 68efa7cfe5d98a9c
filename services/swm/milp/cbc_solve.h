#pragma once
// One CBC branch-and-bound over a program in row form, shared by the exact
// reference (milp.cc) and the exact L2 strategy (exact_l2.cc). Internal to
// swm_milp: it exposes Coin types.

#include <vector>

#include "CoinPackedVector.hpp"

namespace codeco::swm::milp {

/// A mixed-integer program in row form: minimize obj·x subject to
/// row_lb <= rows·x <= row_ub and col_lb <= x <= col_ub, x[i] integer where
/// integer[i].
struct RowProgram {
  std::vector<double> col_lb, col_ub, obj;  ///< Per column: bounds and cost.
  std::vector<bool> integer;                ///< Per column: integer or not.
  std::vector<CoinPackedVector> rows;       ///< Constraint rows.
  std::vector<double> row_lb, row_ub;       ///< Per row: bounds.
};

/// What CBC answered.
struct CbcAnswer {
  std::vector<double> solution;  ///< Best solution found; empty when none in time.
  bool optimal = false;          ///< Proven optimal.
};

/// Solves `program` with CBC for at most `seconds`, silently. Throws
/// CoinError as CBC does.
CbcAnswer SolveWithCbc(const RowProgram& program, double seconds);

}  // namespace codeco::swm::milp
