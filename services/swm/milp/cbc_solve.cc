#include "swm/milp/cbc_solve.h"

#include "CbcModel.hpp"
#include "CoinPackedMatrix.hpp"
#include "OsiClpSolverInterface.hpp"

namespace codeco::swm::milp {

CbcAnswer SolveWithCbc(const RowProgram& p, double seconds) {
  CoinPackedMatrix matrix(false, 0, 0);
  matrix.setDimensions(0, static_cast<int>(p.obj.size()));
  for (const CoinPackedVector& r : p.rows) matrix.appendRow(r);
  OsiClpSolverInterface solver;
  solver.messageHandler()->setLogLevel(0);
  solver.loadProblem(matrix, p.col_lb.data(), p.col_ub.data(), p.obj.data(), p.row_lb.data(),
                     p.row_ub.data());
  for (size_t i = 0; i < p.integer.size(); ++i) {
    if (p.integer[i]) solver.setInteger(static_cast<int>(i));
  }
  CbcModel model(solver);
  model.setLogLevel(0);
  model.messageHandler()->setLogLevel(0);
  model.setMaximumSeconds(seconds);
  model.branchAndBound();
  CbcAnswer answer;
  const double* best = model.bestSolution();
  if (best != nullptr) answer.solution.assign(best, best + p.obj.size());
  answer.optimal = model.isProvenOptimal();
  return answer;
}

}  // namespace codeco::swm::milp
