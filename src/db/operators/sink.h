#pragma once

// The result sink: the last node of every query graph. Its consume tasks keep the batches they
// receive in a list of the worker they run on; after the run the executor turns them into rows.
// The batches of an ordered input (a sort) may arrive on any worker in any order: rows() puts
// them back in the order of their sequence numbers (unordered inputs all carry 0).

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include <mx/db/types.h>
#include <mx/db/vector.h>

#include "operator.h"

namespace mx::db::detail {

class SinkNode final : public BatchNode {
public:
    SinkNode() : BatchNode("result") {}

    void prepare(std::uint16_t workers, std::uint16_t /*regions*/) override {
        _batches = std::make_unique<WorkerBatches[]>(workers);
        _worker_count = workers;
    }

    void consume_batch(dataflow::FlowContext &context, std::unique_ptr<Batch> batch) noexcept override {
        _batches[context.worker_id()].batches.push_back(std::move(batch));
    }

    /// The collected rows (call after the run), in sequence order, worker by worker within it.
    [[nodiscard]] std::vector<std::vector<Value>> rows() const {
        std::vector<const Batch *> batches;
        for (std::uint16_t w = 0; w < _worker_count; ++w) {
            for (const auto &batch : _batches[w].batches) {
                batches.push_back(batch.get());
            }
        }
        std::stable_sort(batches.begin(), batches.end(),
                         [](const Batch *a, const Batch *b) { return a->sequence < b->sequence; });
        std::vector<std::vector<Value>> result;
        {
            for (const Batch *batch : batches) {
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
        }
        return result;
    }

private:
    // Appended by the consume tasks of one worker; read by the executor's thread after the run.
    struct alignas(system::cache_line_size) WorkerBatches {
        std::vector<std::unique_ptr<Batch>> batches;
    };
    std::unique_ptr<WorkerBatches[]> _batches;
    std::uint16_t _worker_count{0};
};

} // namespace mx::db::detail
