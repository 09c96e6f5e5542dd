#include <atomic>
#include <cstdio>

#include <mx/tasking/runtime.h>

int main() {
    mx::tasking::Runtime runtime{mx::tasking::RuntimeConfig{.workers = 2}};
    std::atomic<int> sum{0};
    for (int i = 1; i <= 100; ++i) {
        runtime.spawn([&sum, i] { sum.fetch_add(i, std::memory_order_relaxed); });
    }
    runtime.wait();
    std::printf("out-of-tree: sum = %d\n", sum.load());
    return sum.load() == 5050 ? 0 : 1;
}
