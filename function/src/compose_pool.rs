//! Long-lived threads with [`CALL_STACK_BYTES`] of stack that the server composes on.
//!
//! Every call needs that stack (an accepted CEL expression may recurse deeply), but creating a thread of that size
//! per call cost more than composing a small composite. The server's call semaphore bounds the calls in flight, so
//! a pool of that many threads never makes a call wait for a thread.
//!
//! Each thread keeps the pages its calls freed for its next call (the allocator's per-thread free lists, see
//! [`crate::memory`]), and only that thread can hand them back. So a thread that ran a call hands them back once
//! it has been idle for [`IDLE_BEFORE_RETURNING_MEMORY`]; otherwise a burst of concurrent large calls would leave
//! every thread holding its share of the peak.

use std::{
    collections::VecDeque,
    panic::{AssertUnwindSafe, catch_unwind},
    sync::{Arc, Condvar, Mutex},
    thread,
    time::Duration,
};

use crate::{limits::CALL_STACK_BYTES, memory};

type Job = Box<dyn FnOnce() + Send>;

/// How long a thread that ran a call waits for the next before handing the pages it freed back.
pub const IDLE_BEFORE_RETURNING_MEMORY: Duration = Duration::from_secs(1);

/// A fixed set of composing threads fed through one queue. The threads stop once every clone is dropped.
#[derive(Clone)]
pub struct ComposePool {
    shared: Arc<Shared>,
    _open: Arc<OpenWhileHeld>,
}

impl std::fmt::Debug for ComposePool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ComposePool").finish_non_exhaustive()
    }
}

struct Shared {
    queue: Mutex<Queue>,
    /// Signalled when a job is queued or the pool closes.
    ready: Condvar,
}

struct Queue {
    jobs: VecDeque<Job>,
    open: bool,
}

/// Closes the queue when the last handle of the pool goes.
struct OpenWhileHeld(Arc<Shared>);

impl Drop for OpenWhileHeld {
    fn drop(&mut self) {
        if let Ok(mut queue) = self.0.queue.lock() {
            queue.open = false;
        }
        self.0.ready.notify_all();
    }
}

impl ComposePool {
    /// Starts `threads` threads (at least one). Their stacks are reserved address space, not memory in use.
    pub fn new(threads: usize) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            queue: Mutex::new(Queue {
                jobs: VecDeque::new(),
                open: true,
            }),
            ready: Condvar::new(),
        });
        for _ in 0..threads.max(1) {
            let shared = Arc::clone(&shared);
            thread::Builder::new()
                .name("run-function".into())
                .stack_size(CALL_STACK_BYTES)
                .spawn(move || work(&shared))?;
        }
        Ok(Self {
            _open: Arc::new(OpenWhileHeld(Arc::clone(&shared))),
            shared,
        })
    }

    /// Queues `job`; false when the queue is unusable (a thread panicked while holding its lock).
    pub fn run(&self, job: impl FnOnce() + Send + 'static) -> bool {
        let Ok(mut queue) = self.shared.queue.lock() else {
            return false;
        };
        queue.jobs.push_back(Box::new(job));
        drop(queue);
        self.shared.ready.notify_one();
        true
    }
}

enum Next {
    Job(Job),
    /// No job came within [`IDLE_BEFORE_RETURNING_MEMORY`].
    Idle,
    Closed,
}

fn work(shared: &Shared) {
    let mut holds_freed = false;
    loop {
        match next(shared, holds_freed) {
            Next::Job(job) => {
                // Composers already contain their panics; this keeps the thread for the next call if anything
                // else does.
                let _ = catch_unwind(AssertUnwindSafe(job));
                holds_freed = true;
            }
            Next::Idle => {
                memory::return_free_memory();
                holds_freed = false;
            }
            Next::Closed => return,
        }
    }
}

/// Waits for the next job; while this thread holds freed pages, only until it has been idle long enough.
fn next(shared: &Shared, holds_freed: bool) -> Next {
    let Ok(mut queue) = shared.queue.lock() else {
        return Next::Closed;
    };
    loop {
        if let Some(job) = queue.jobs.pop_front() {
            return Next::Job(job);
        }
        if !queue.open {
            return Next::Closed;
        }
        queue = if holds_freed {
            match shared.ready.wait_timeout(queue, IDLE_BEFORE_RETURNING_MEMORY) {
                Ok((queue, waited)) if waited.timed_out() && queue.jobs.is_empty() && queue.open => {
                    return Next::Idle;
                }
                Ok((queue, _)) => queue,
                Err(_) => return Next::Closed,
            }
        } else {
            match shared.ready.wait(queue) {
                Ok(queue) => queue,
                Err(_) => return Next::Closed,
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use std::sync::mpsc;

    use super::*;

    #[test]
    fn jobs_run_on_big_stack_threads_and_a_panic_does_not_lose_the_thread() {
        let pool = ComposePool::new(1).unwrap();
        let (done, results) = mpsc::channel::<u32>();
        let first = done.clone();
        assert!(pool.run(move || {
            let _ = first.send(0);
            panic!("a job that panics");
        }));
        // Recursion a default 2 MiB stack could not hold: 10,000 frames of over 1 KiB each.
        fn deep(n: u32) -> u32 {
            let pad = std::hint::black_box([0u8; 1024]);
            if n == 0 {
                0
            } else {
                deep(n - 1) + u32::from(pad[usize::try_from(n).unwrap_or(0) % 1024])
            }
        }
        assert!(pool.run(move || {
            let _ = done.send(std::hint::black_box(deep(10_000)));
        }));
        results.recv().unwrap();
        results.recv().unwrap();
    }

    #[test]
    fn a_thread_hands_freed_pages_back_once_idle_and_all_stop_with_the_pool() {
        let pool = ComposePool::new(2).unwrap();
        let (done, finished) = mpsc::channel::<usize>();
        for _ in 0..4 {
            let done = done.clone();
            assert!(pool.run(move || {
                let _ = done.send(std::hint::black_box(vec![1u8; 1 << 20]).len());
            }));
        }
        for _ in 0..4 {
            assert_eq!(finished.recv().unwrap(), 1 << 20);
        }
        // Idle threads return their pages and go on serving.
        thread::sleep(IDLE_BEFORE_RETURNING_MEMORY * 2);
        let again = done.clone();
        assert!(pool.run(move || {
            let _ = again.send(7);
        }));
        assert_eq!(finished.recv().unwrap(), 7);
        // Once the pool is dropped its threads end, and with them their clones of the sender.
        drop(done);
        drop(pool);
        assert!(finished.recv().is_err());
    }
}
