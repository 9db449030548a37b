//! The allocator the function runs on, and handing freed memory back to the system.
//!
//! Composing is allocation-bound: a first placement makes and frees about 2,000 small allocations (JSON map
//! leaves, strings, vectors) in bursts. glibc's malloc serves a burst that overflows its per-thread cache from
//! its shared bins, and that was 46% of the instructions of a placement. mimalloc (v3) keeps free lists per size
//! class and page on each thread and serves the same burst at a fraction of the cost (docs/benchmarks.md has the
//! figures).
//! It is declared here, in the library, so the server, `render`, the tests and the in-process benchmarks all run
//! on the allocator they are measured on. Transparent huge pages stay off (`no_thp`): a 2 MiB page that holds
//! one live object cannot be handed back.

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Hands back to the system the pages the calling thread's heap holds free, and every page already freed to the
/// shared arenas. Only a thread can release its own heap's pages, so each composing thread calls this once idle
/// (`compose_pool`), and the server once no call runs.
pub fn return_free_memory() {
    // SAFETY: mi_collect only releases pages that hold no live allocation; nothing that is in use moves.
    unsafe { libmimalloc_sys::mi_collect(true) }
}
