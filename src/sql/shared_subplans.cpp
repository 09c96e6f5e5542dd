// The optimizer pass shared_subplans: a CTE the plan references more than once is computed once.
// The binder inlines a CTE at every reference (each bound anew, with its own column ids) and
// marks the projection on top of each copy with the CTE's number. Here the first copy becomes a
// SharedPlan and every copy, the first included, a shared_scan reading it; the physical plan
// materializes its result once and lets every reader scan it after it completed. A CTE
// referenced once stays inlined, so conditions and column pruning reach into it; a shared one
// is a leaf to the passes over its readers' plans (nothing pushed into it could hold for the
// other readers) and optimized on its own.

#include <map>
#include <memory>
#include <vector>

#include "optimizer.h"

namespace mx::sql::detail {

namespace {

/// References per CTE number in `node`, copies inside other CTEs' copies included.
void count_references(const LogicalNode &node, std::map<std::uint32_t, std::size_t> &counts) {
    if (node.cte != 0) {
        ++counts[node.cte];
    }
    for (const auto &child : node.children) {
        count_references(*child, counts);
    }
}

/// The first CTE number in pre-order that is referenced more than once (0: none). Pre-order
/// meets a CTE before the CTEs its query references, so the outer one is shared first and the
/// copies of the inner ones inside its dropped copies no longer count.
std::uint32_t first_repeated(const LogicalNode &node, const std::map<std::uint32_t, std::size_t> &counts) {
    if (node.cte != 0 && counts.at(node.cte) > 1) {
        return node.cte;
    }
    for (const auto &child : node.children) {
        if (const std::uint32_t found = first_repeated(*child, counts); found != 0) {
            return found;
        }
    }
    return 0;
}

/// Replaces every copy of CTE `cte` in the subtree by a reader of `shared` (the first copy
/// becomes its plan).
void replace_copies(LogicalPtr &node, std::uint32_t cte, const std::shared_ptr<SharedPlan> &shared) {
    if (node->cte == cte) {
        std::vector<ColumnId> output = node->output;
        if (shared->plan == nullptr) {
            shared->name = node->alias;
            node->cte = 0;
            shared->plan = std::move(node);
        }
        node = make_shared_scan(shared, std::move(output));
        return;
    }
    for (auto &child : node->children) {
        replace_copies(child, cte, shared);
    }
}

} // namespace

std::vector<std::shared_ptr<SharedPlan>> share_subplans(LogicalPtr &root) {
    std::vector<std::shared_ptr<SharedPlan>> made;
    for (;;) {
        std::map<std::uint32_t, std::size_t> counts;
        count_references(*root, counts);
        for (const auto &shared : made) {
            count_references(*shared->plan, counts);
        }
        std::uint32_t cte = first_repeated(*root, counts);
        for (std::size_t i = 0; i < made.size() && cte == 0; ++i) {
            cte = first_repeated(*made[i]->plan, counts);
        }
        if (cte == 0) {
            return made;
        }
        auto shared = std::make_shared<SharedPlan>();
        shared->id = static_cast<std::uint32_t>(made.size() + 1);
        replace_copies(root, cte, shared);
        for (std::size_t i = 0; i < made.size(); ++i) {
            replace_copies(made[i]->plan, cte, shared);
        }
        made.push_back(std::move(shared));
    }
}

} // namespace mx::sql::detail
