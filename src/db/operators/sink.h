#pragma once

// The result sink: the last node of every query graph. Its consume tasks keep the batches they
// receive in a list of the worker they run on; after the run the executor turns them into rows.
// The batches of an ordered input (a sort) may arrive on any worker in any order: rows() puts
// them back in the order of their sequence numbers (unordered inputs all carry 0). columns()
// does the same into one array per column (ExecutionOptions::columnar).

#include <cstdint>
#include <memory>
#include <vector>

#include <mx/db/executor.h>
#include <mx/db/plan.h>
#include <mx/db/types.h>
#include <mx/db/vector.h>

#include "operator.h"

namespace mx::db::detail {

class SinkNode final : public BatchNode {
public:
    SinkNode() : BatchNode("result") {}

    void prepare(std::uint16_t workers, std::uint16_t /*regions*/) override { _batches.prepare(workers); }

    void consume_batch(dataflow::FlowContext &context, std::unique_ptr<Batch> batch) noexcept override {
        _batches.add(context.worker_id(), std::move(batch));
    }

    /// The collected rows (call after the run), in sequence order, worker by worker within it.
    [[nodiscard]] std::vector<std::vector<Value>> rows() const {
        std::vector<std::vector<Value>> result;
        for (const Batch *batch : _batches.in_sequence()) {
            const std::uint32_t count = batch->count();
            for (std::uint32_t i = 0; i < count; ++i) {
                const std::uint32_t row = batch->row(i);
                std::vector<Value> values;
                values.reserve(batch->columns.size());
                for (const Vector &column : batch->columns) {
                    values.push_back(column.value(row));
                }
                result.push_back(std::move(values));
            }
        }
        return result;
    }

    /// The collected rows as whole columns of the given types (call after the run): parallel copy
    /// tasks on `runtime`, one per batch. Call from outside the runtime's workers.
    [[nodiscard]] std::shared_ptr<ColumnarResult> columns(tasking::Runtime &runtime,
                                                          const std::vector<OutputColumn> &types) const;

private:
    CollectedBatches _batches; // read by the executor's thread after the run
};

} // namespace mx::db::detail
