//! The allocator the function runs on, and handing freed memory back to the system.
//!
//! Composing is allocation-bound: a first placement makes and frees about 2,000 small allocations (JSON map
//! leaves, strings, vectors) in bursts. glibc's malloc serves a burst that overflows its per-thread cache from
//! its shared bins, and that was 46% of the instructions of a placement. mimalloc (v3) keeps free lists per size
//! class and page on each thread and serves the same burst at a fraction of the cost (docs/benchmarks.md has the
//! figures).
//! The library only defines it: choosing the allocator is the process's choice, so each binary that composes
//! (the function's own, the in-process benchmarks) declares `#[global_allocator] static ALLOCATOR: Mimalloc =
//! Mimalloc;`, and a process that only links the library (the tests crate, the fuzz targets) keeps its own.
//! Transparent huge pages stay off (`no_thp`): a 2 MiB page that holds one live object cannot be handed back.

use std::alloc::{GlobalAlloc, Layout};

use libmimalloc_sys::{
    mi_free, mi_malloc, mi_malloc_aligned, mi_realloc, mi_realloc_aligned, mi_zalloc, mi_zalloc_aligned,
};

/// Every block mimalloc hands out is aligned to at least a word: its smallest size class is a word, and every
/// size class is a multiple of one.
const WORD_ALIGNED: usize = std::mem::align_of::<usize>();

/// mimalloc, entered by its plain calls wherever a word's alignment is enough, which is nearly every Rust
/// allocation (strings, vectors, map nodes). The `mimalloc` crate enters every allocation through the aligned
/// calls, whose checks and fallback (over-allocating whenever a page has no free block at hand) cost a first
/// placement 41k of its 930k instructions in process.
pub struct Mimalloc;

// SAFETY: every block comes from mimalloc with at least the layout's alignment (plain calls only for alignments
// a word covers) and goes back to `mi_free`, which takes blocks from either kind of call.
unsafe impl GlobalAlloc for Mimalloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: mimalloc's entry points have no preconditions on size and alignment (a power of two).
        unsafe {
            if layout.align() <= WORD_ALIGNED {
                mi_malloc(layout.size()).cast()
            } else {
                mi_malloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as in `alloc`.
        unsafe {
            if layout.align() <= WORD_ALIGNED {
                mi_zalloc(layout.size()).cast()
            } else {
                mi_zalloc_aligned(layout.size(), layout.align()).cast()
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        // SAFETY: `ptr` came from this allocator (the caller's contract).
        unsafe { mi_free(ptr.cast()) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from this allocator with `layout` (the caller's contract); the alignment is kept.
        unsafe {
            if layout.align() <= WORD_ALIGNED {
                mi_realloc(ptr.cast(), new_size).cast()
            } else {
                mi_realloc_aligned(ptr.cast(), new_size, layout.align()).cast()
            }
        }
    }
}

/// Hands back to the system the pages the calling thread's heap holds free, and every page already freed to the
/// shared arenas. Only a thread can release its own heap's pages, so each composing thread calls this once idle
/// (`compose_pool`), and the server once no call runs.
pub fn return_free_memory() {
    // SAFETY: mi_collect only releases pages that hold no live allocation; nothing that is in use moves.
    unsafe { libmimalloc_sys::mi_collect(true) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every alignment a layout can ask for up to a page, at sizes under, at and over it, through each call:
    /// the blocks come back aligned, and a reallocated block keeps its contents.
    #[test]
    fn blocks_have_the_alignment_their_layout_asks_for() {
        for align in (0..=12).map(|shift| 1usize << shift) {
            for size in [1, 3, 7, 8, 9, 24, 40, 100, 1000, 5000, 70_000] {
                let Ok(layout) = Layout::from_size_align(size, align) else {
                    continue;
                };
                // SAFETY: the layouts have a non-zero size; every block is freed with the layout it has.
                unsafe {
                    let block = Mimalloc.alloc(layout);
                    assert!(!block.is_null());
                    assert_eq!(block.addr() % align, 0, "alloc: size {size}, align {align}");
                    block.write_bytes(0xA5, size);
                    let grown = Mimalloc.realloc(block, layout, size * 3);
                    assert_eq!(grown.addr() % align, 0, "realloc: size {size}, align {align}");
                    assert!(
                        (0..size).all(|i| *grown.add(i) == 0xA5),
                        "realloc lost the contents"
                    );
                    Mimalloc.dealloc(grown, Layout::from_size_align_unchecked(size * 3, align));
                    let zeroed = Mimalloc.alloc_zeroed(layout);
                    assert_eq!(
                        zeroed.addr() % align,
                        0,
                        "alloc_zeroed: size {size}, align {align}"
                    );
                    assert!((0..size).all(|i| *zeroed.add(i) == 0), "alloc_zeroed: not zeroed");
                    Mimalloc.dealloc(zeroed, layout);
                }
            }
        }
    }
}
