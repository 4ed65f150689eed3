//! The process's allocator: mimalloc, called the way the system allocator is.
//!
//! An answer makes about ten short-lived allocations (the request's head, header values, the
//! reply). glibc's malloc spends some 140 instructions on each allocate-and-free pair; mimalloc's
//! per-thread pages about half that, and every worker is one thread (bench/README.md,
//! "allocator"). The `mimalloc` crate's own wrapper asks for an aligned block every time, which
//! takes mimalloc's slower aligned path; here only an alignment that an ordinary block does not
//! already have goes that way, as Rust's system allocator does with malloc.

use std::alloc::{GlobalAlloc, Layout};
use std::ffi::c_void;

use libmimalloc_sys::{mi_free, mi_malloc, mi_malloc_aligned, mi_realloc, mi_realloc_aligned};
use libmimalloc_sys::{mi_zalloc, mi_zalloc_aligned};

/// The alignment every mimalloc block of at least this size has (`MI_MAX_ALIGN_SIZE`).
const PLAIN_ALIGN: usize = 16;

pub struct Mimalloc;

/// Whether a plain allocation of `size` bytes is already aligned enough for `align`: blocks of
/// 16 bytes and more are 16-aligned, smaller ones aligned to their power-of-two size class.
fn plain(size: usize, align: usize) -> bool {
    align <= PLAIN_ALIGN && align <= size
}

// SAFETY: every function hands the request to mimalloc, which returns null on failure and a
// block of at least `size` bytes aligned to `align` otherwise (the plain functions only when
// `plain` says their alignment suffices); blocks are freed with `mi_free` whichever function
// made them.
unsafe impl GlobalAlloc for Mimalloc {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if plain(layout.size(), layout.align()) {
            mi_malloc(layout.size()).cast()
        } else {
            mi_malloc_aligned(layout.size(), layout.align()).cast()
        }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if plain(layout.size(), layout.align()) {
            mi_zalloc(layout.size()).cast()
        } else {
            mi_zalloc_aligned(layout.size(), layout.align()).cast()
        }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: Layout) {
        mi_free(ptr.cast::<c_void>());
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if plain(new_size, layout.align()) {
            mi_realloc(ptr.cast(), new_size).cast()
        } else {
            mi_realloc_aligned(ptr.cast(), new_size, layout.align()).cast()
        }
    }
}

extern "C" {
    /// mimalloc's `mi_collect`: frees and returns to the system what the calling thread's heap
    /// holds unused (`force`: all of it now, not only the pages whose purge delay has passed;
    /// without it, 10,000 parked connections still showed ~1.6 KB each of freed tasks).
    fn mi_collect(force: bool);
}

/// Gives the calling thread's unused memory back to the system (see
/// `shoal_server::spare::release_freed`).
pub fn release_freed() {
    // SAFETY: mi_collect takes no pointers and may be called from any thread at any time.
    unsafe { mi_collect(true) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_have_the_alignment_asked_for() {
        for size in [1usize, 3, 8, 15, 16, 24, 100, 4096, 1 << 20] {
            for align in [1usize, 2, 8, 16, 32, 64, 128, 4096] {
                let layout = Layout::from_size_align(size, align).unwrap();
                // SAFETY: a non-zero size; the block is freed below with the same layout.
                unsafe {
                    let p = Mimalloc.alloc(layout);
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "size {size} align {align}");
                    p.write_bytes(0xa5, size);
                    let q = Mimalloc.realloc(p, layout, size * 3);
                    assert_eq!(q as usize % align, 0, "realloc size {size} align {align}");
                    assert_eq!(*q.add(size - 1), 0xa5);
                    Mimalloc.dealloc(q, Layout::from_size_align(size * 3, align).unwrap());
                    let z = Mimalloc.alloc_zeroed(layout);
                    assert_eq!(z as usize % align, 0);
                    assert!((0..size).all(|i| *z.add(i) == 0));
                    Mimalloc.dealloc(z, layout);
                }
            }
        }
    }
}
