// The public Runtime: a thin handle on detail::RuntimeCore (runtime_core.cpp). Each mechanism of
// the runtime has its own file; docs/design/scheduler.md ("Where the code is") lists them.

#include "mx/tasking/runtime.h"

namespace mx::tasking {

Runtime::Runtime(const RuntimeConfig &config) : _core(std::make_unique<detail::RuntimeCore>(config)) {
    _core->start();
    start_env_trace();
}

Runtime::~Runtime() {
    stop_env_trace();
    _core->stop();
}

void Runtime::start() { _core->start(); }

void Runtime::stop() noexcept { _core->stop(); }

void Runtime::delete_task(Task &task) noexcept {
    detail::Worker *worker = detail::current_worker();
    if (worker != nullptr && &worker->core() == _core.get()) {
        worker->destroy(task);
    } else {
        _core->destroy_external(task);
    }
}

std::vector<WorkerStatistics> Runtime::statistics() const {
    std::vector<WorkerStatistics> result;
    for (std::uint16_t id = 0; id < _core->worker_count(); ++id) {
        result.push_back(_core->worker(id).statistics());
    }
    return result;
}

} // namespace mx::tasking
