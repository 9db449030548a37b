//! Long-lived threads with [`CALL_STACK_BYTES`] of stack that the server composes on.
//!
//! Every call needs that stack (an accepted CEL expression may recurse deeply), but creating a thread of that size
//! per call cost more than composing a small composite. The server's call semaphore bounds the calls in flight, so
//! a pool of that many threads never makes a call wait for a thread.

use std::{
    panic::{AssertUnwindSafe, catch_unwind},
    sync::{Arc, Mutex, mpsc},
    thread,
};

use crate::limits::CALL_STACK_BYTES;

type Job = Box<dyn FnOnce() + Send>;

/// A fixed set of composing threads fed through one queue.
#[derive(Debug, Clone)]
pub struct ComposePool {
    jobs: mpsc::Sender<Job>,
}

impl ComposePool {
    /// Starts `threads` threads (at least one). Their stacks are reserved address space, not memory in use.
    pub fn new(threads: usize) -> std::io::Result<Self> {
        let (jobs, queue) = mpsc::channel::<Job>();
        let queue = Arc::new(Mutex::new(queue));
        for _ in 0..threads.max(1) {
            let queue = Arc::clone(&queue);
            thread::Builder::new()
                .name("run-function".into())
                .stack_size(CALL_STACK_BYTES)
                .spawn(move || work(&queue))?;
        }
        Ok(Self { jobs })
    }

    /// Queues `job`; false when no thread is left to run it.
    pub fn run(&self, job: impl FnOnce() + Send + 'static) -> bool {
        self.jobs.send(Box::new(job)).is_ok()
    }
}

fn work(queue: &Mutex<mpsc::Receiver<Job>>) {
    loop {
        // The lock is held only while waiting for the next job, never while running one.
        let next = match queue.lock() {
            Ok(queue) => queue.recv(),
            Err(_) => return,
        };
        let Ok(job) = next else { return };
        // Composers already contain their panics; this keeps the thread for the next call if anything else does.
        let _ = catch_unwind(AssertUnwindSafe(job));
    }
}

#[cfg(test)]
mod tests {
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
}
