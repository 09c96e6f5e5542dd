#pragma once

// The two queues a task pool is built from. Both are intrusive (linked through Task::_next),
// so enqueueing never allocates.

#include <atomic>
#include <cstddef>

#include "mx/system/cpu.h"
#include "mx/tasking/task.h"

namespace mx::tasking::detail {

/// FIFO for tasks a worker spawns for itself. Owner-private: no synchronization.
template <class T>
class IntrusiveQueue {
public:
    void push_back(T &task) noexcept {
        task._next.store(nullptr, std::memory_order_relaxed);
        if (_tail == nullptr) {
            _head = &task;
        } else {
            _tail->_next.store(&task, std::memory_order_relaxed);
        }
        _tail = &task;
    }

    void push_front(T &task) noexcept {
        task._next.store(_head, std::memory_order_relaxed);
        if (_head == nullptr) {
            _tail = &task;
        }
        _head = &task;
    }

    /// Moves all of `chain` (in its order) in front of this queue's tasks.
    void prepend(IntrusiveQueue &chain) noexcept {
        if (chain._head == nullptr) {
            return;
        }
        chain._tail->_next.store(_head, std::memory_order_relaxed);
        if (_head == nullptr) {
            _tail = chain._tail;
        }
        _head = chain._head;
        chain._head = nullptr;
        chain._tail = nullptr;
    }

    T *pop_front() noexcept {
        T *task = _head;
        if (task != nullptr) {
            _head = task->_next.load(std::memory_order_relaxed);
            if (_head == nullptr) {
                _tail = nullptr;
            }
        }
        return task;
    }

    [[nodiscard]] bool empty() const noexcept { return _head == nullptr; }
    [[nodiscard]] T *front() const noexcept { return _head; }
    [[nodiscard]] T *back() const noexcept { return _tail; }
    /// Forgets the tasks (they were handed on as a chain).
    void clear() noexcept { _head = _tail = nullptr; }

private:
    T *_head{nullptr};
    T *_tail{nullptr};
};

/// Multi-producer, single-consumer FIFO (Vyukov's intrusive design): a push is one atomic
/// exchange plus one store, wait-free; tasks of one producer leave in the order they entered.
/// While a producer is between its exchange and its link store, the consumer sees the queue as
/// non-empty but cannot pop yet; pop() then returns nullptr and the worker retries.
template <class T>
class MpscQueue {
public:
    MpscQueue() noexcept : _tail(&_stub), _head(&_stub) {}
    MpscQueue(const MpscQueue &) = delete;
    MpscQueue &operator=(const MpscQueue &) = delete;

    /// Any thread. seq_cst exchange: the worker's sleep protocol relies on its total order.
    void push(T &task) noexcept {
        task._next.store(nullptr, std::memory_order_relaxed);
        T *previous = _tail.exchange(&task, std::memory_order_seq_cst);
        previous->_next.store(&task, std::memory_order_release);
    }

    /// Any thread: appends a chain linked by one producer (IntrusiveQueue) as if its tasks were
    /// pushed one by one in order, with one exchange. The chain is empty afterwards.
    void push_all(IntrusiveQueue<T> &chain) noexcept {
        if (chain.empty()) {
            return;
        }
        T *previous = _tail.exchange(chain.back(), std::memory_order_seq_cst);
        // Release: the consumer that follows this link also sees the chain's inner links.
        previous->_next.store(chain.front(), std::memory_order_release);
        chain.clear();
    }

    /// Consumer only.
    T *pop() noexcept {
        T *head = _head;
        T *next = head->_next.load(std::memory_order_acquire);
        if (head == &_stub) {
            if (next == nullptr) {
                return nullptr;
            }
            _head = next;
            head = next;
            next = next->_next.load(std::memory_order_acquire);
        }
        if (next != nullptr) {
            _head = next;
            return head;
        }
        if (_tail.load(std::memory_order_acquire) != head) {
            return nullptr; // a producer is linking in; retry later
        }
        push(_stub);
        next = head->_next.load(std::memory_order_acquire);
        if (next != nullptr) {
            _head = next;
            return head;
        }
        return nullptr;
    }

    /// Consumer only: pops up to `capacity` tasks into `out`; returns how many.
    std::uint32_t pop_into(T **out, std::uint32_t capacity) noexcept {
        std::uint32_t count = 0;
        while (count < capacity) {
            T *task = pop();
            if (task == nullptr) {
                break;
            }
            out[count++] = task;
        }
        return count;
    }

    /// Any thread: true when nothing is queued and no push has started (a snapshot). The
    /// consumer puts the stub back as the tail when it takes the last task.
    [[nodiscard]] bool looks_empty() const noexcept {
        return _tail.load(std::memory_order_seq_cst) == &_stub;
    }

    /// Consumer only. False while any push has started and its task has not been popped.
    [[nodiscard]] bool empty() const noexcept {
        return _head == &_stub && _tail.load(std::memory_order_seq_cst) == &_stub;
    }

private:
    class Stub final : public Task {
    public:
        TaskResult execute(TaskContext &) noexcept override { return TaskResult::done(); }
    };

    // Written by every producer (exchange), read by the consumer.
    alignas(system::cache_line_size) std::atomic<T *> _tail;
    // Consumer-private.
    alignas(system::cache_line_size) T *_head;
    Stub _stub;
};

} // namespace mx::tasking::detail
