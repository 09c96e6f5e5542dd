#pragma once

// The physical planner: an optimized logical plan -> db::PlanNode tree (plan:: builders), with
// column pruning (every operator receives only the columns someone above still reads) and the
// optimizer's estimates, join choices and scan prefetch strategies copied onto the nodes.

#include <string>
#include <vector>

#include <mx/db/plan.h>

#include "logical.h"

namespace mx::sql::detail {

struct PhysicalPlan {
    db::PlanPtr root;
};

/// Plans `root`, whose output columns are returned in order under `names`.
[[nodiscard]] PhysicalPlan plan_physical(const LogicalNode &root, const std::vector<std::string> &names,
                                         const ColumnRegistry &columns);

} // namespace mx::sql::detail
