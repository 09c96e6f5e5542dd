#include "mx/sync/primitives.h"

#include <cpuid.h>
#include <immintrin.h>

#include "mx/tasking/runtime.h"

namespace mx::sync {

const char *to_string(Primitive primitive) noexcept {
    switch (primitive) {
    case Primitive::none:
        return "none";
    case Primitive::spinlock:
        return "spinlock";
    case Primitive::rw_latch:
        return "rw_latch";
    case Primitive::optimistic_latched:
        return "optimistic_latched";
    case Primitive::optimistic_scheduled:
        return "optimistic_scheduled";
    case Primitive::htm:
        return "htm";
    case Primitive::scheduling:
        return "scheduling";
    }
    return "unknown";
}

namespace {

[[maybe_unused]] __attribute__((target("rtm"))) bool try_transactions() noexcept {
    // Some CPUs list RTM but the kernel or microcode makes every transaction abort (TSX off):
    // require a handful of tiny transactions to commit.
    int committed = 0;
    volatile int probe = 0;
    for (int i = 0; i < 64 && committed < 8; ++i) {
        if (_xbegin() == _XBEGIN_STARTED) {
            probe = probe + 1;
            _xend();
            ++committed;
        }
    }
    return committed >= 8;
}

bool detect_htm() noexcept {
#if defined(MX_TSAN)
    // ThreadSanitizer cannot follow transactions; its builds exercise the fallback instead.
    return false;
#elif defined(__x86_64__)
    // CPUID leaf 7, EBX bit 11: RTM (clang 15 has no "rtm" for __builtin_cpu_supports).
    unsigned eax = 0;
    unsigned ebx = 0;
    unsigned ecx = 0;
    unsigned edx = 0;
    return __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0 && (ebx & (1U << 11U)) != 0 &&
           try_transactions();
#else
    return false;
#endif
}

} // namespace

bool htm_available() noexcept {
    static const bool available = detect_htm();
    return available;
}

} // namespace mx::sync

namespace mx::tasking::detail {

__attribute__((target("rtm"))) TaskResult Worker::run_transaction(Task &task, TaskContext &context,
                                                                  ResourceHeader &header) noexcept {
    constexpr int attempts = 8;
    constexpr unsigned lock_held = 0xff;
    if (_core->htm()) {
        for (int attempt = 0; attempt < attempts; ++attempt) {
            const unsigned status = _xbegin();
            if (status == _XBEGIN_STARTED) {
                // Reading the fallback lock puts it into the read set: a fallback owner aborts us.
                if (header.spinlock.is_locked()) {
                    _xabort(lock_held);
                }
                TaskResult result = task.execute(context);
                _xend();
                return result;
            }
            if ((status & _XABORT_EXPLICIT) != 0 && _XABORT_CODE(status) == lock_held) {
                while (header.spinlock.is_locked()) {
                    system::pause();
                }
            } else if ((status & _XABORT_RETRY) == 0) {
                break; // capacity, syscall, ...: retrying will not help
            }
        }
    }
    header.spinlock.lock();
    TaskResult result = task.execute(context);
    header.spinlock.unlock();
    return result;
}

} // namespace mx::tasking::detail
