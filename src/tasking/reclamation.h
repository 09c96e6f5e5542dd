#pragma once

// Epoch-based reclamation: the worker's reclamation task. Private to the runtime.

#include <memory>

#include "mx/tasking/task.h"

namespace mx::tasking::detail {

class Worker;

/// The task through which `worker` frees what it retired (see reclamation.cpp).
std::unique_ptr<Task> make_reclaim_task(Worker &worker);

} // namespace mx::tasking::detail
