#include <atomic>
#include <cstdio>
#include <mx/tasking/runtime.h>

int main() {
    mx::tasking::Runtime runtime{}; // one pinned worker per core
    std::atomic<int> greeted{0};
    for (int i = 0; i < 8; ++i) {
        runtime.spawn([&greeted, i](mx::tasking::TaskContext &context) {
            std::printf("hello %d from worker %u\n", i, unsigned{context.worker_id()});
            greeted.fetch_add(1);
        });
    }
    runtime.wait(); // until every task (and what they spawned) ran
    return greeted.load() == 8 ? 0 : 1;
}
