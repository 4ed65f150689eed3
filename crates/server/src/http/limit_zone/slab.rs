//! How many states fit in a zone: a model of nginx's slab allocator, so that a
//! `zone=one:10m` holds what it holds in nginx (checked against nginx 1.22 on x86-64: a
//! 32k `limit_req` zone keeps 191 states of keys up to 48 bytes, 80 of 49 to 176 bytes, 40
//! of 177 to 432; a 64k one 447 and 208; a 32k `limit_conn` zone 80 keys of 201 bytes).
//!
//! nginx carves a zone into 4 KiB pages after a header (the pool, its slot and statistics
//! tables: 720 bytes, then 24 bytes of descriptor per page, the pages aligned to 4 KiB). An
//! allocation of up to 2 KiB takes a chunk of the next power of two (at least 8 bytes) from a
//! page of that size class (chunks of 8, 16 and 32 bytes give up a few to the page's bitmap);
//! a larger one takes whole pages. The module's own structures are allocated first (the tree
//! root, and the name for log lines), then one node per state: `limit_req` 80 bytes + key,
//! `limit_conn` 36 bytes + key.
//!
//! This model counts chunks per class and the pages they need as if each class were packed
//! tight, which is exact when a zone's keys are all of one size class (the usual
//! `$binary_remote_addr`) and a little generous when sizes mix (nginx's freed chunks stay in
//! their half-empty pages). It is bookkeeping only, in the zone's shared memory under a lock
//! taken when a state is created or dropped, never on a lookup.

use shoal_io::shm::{self, Carver, Shared};

pub const PAGE: u64 = 4096;
/// The slab pool's header before the page descriptors (x86-64).
const HEADER: u64 = 720;
/// One page descriptor.
const PAGE_DESC: u64 = 24;
/// Size classes 8 … 2048 bytes.
const CLASSES: usize = 9;

/// A zone's memory budget.
pub struct Slab {
    pages: u64,
    used: Shared<shm::Mutex<Used>>,
}

impl std::fmt::Debug for Slab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slab").field("pages", &self.pages).finish()
    }
}

#[derive(Debug, Default)]
struct Used {
    /// Chunks in use per size class.
    chunks: [u64; CLASSES],
    /// Pages taken by allocations larger than half a page.
    big_pages: u64,
}

// SAFETY: numbers.
unsafe impl shm::Plain for Used {}

/// How an allocation of `size` bytes is served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// A chunk of class `i` (`8 << i` bytes).
    Chunk(usize),
    /// Whole pages.
    Pages(u64),
}

fn class(size: u64) -> Class {
    if size > PAGE / 2 {
        return Class::Pages(size.div_ceil(PAGE));
    }
    let chunk = size.max(8).next_power_of_two();
    Class::Chunk(chunk.trailing_zeros() as usize - 3)
}

/// Chunks of class `i` one page holds (small chunks lose some to the page's bitmap).
fn per_page(i: usize) -> u64 {
    let chunk = 8u64 << i;
    let n = PAGE / chunk;
    if chunk >= 64 {
        return n;
    }
    // The bitmap (one bit per chunk) at the page's start, in whole chunks, at least one.
    let bitmap = (n / (chunk * 8)).max(1);
    n - bitmap
}

impl Used {
    fn pages(&self) -> u64 {
        let chunked: u64 = (0..CLASSES)
            .map(|i| self.chunks[i].div_ceil(per_page(i)))
            .sum();
        chunked + self.big_pages
    }

    fn add(&mut self, c: Class, n: i64) {
        match c {
            Class::Chunk(i) => self.chunks[i] = self.chunks[i].saturating_add_signed(n),
            Class::Pages(p) => self.big_pages = self.big_pages.saturating_add_signed(n * p as i64),
        }
    }
}

/// The usable pages of a zone of `size` bytes.
pub fn pages(size: u64) -> u64 {
    if size <= HEADER {
        return 0;
    }
    let mut pages = (size - HEADER) / (PAGE + PAGE_DESC);
    let start = (HEADER + pages * PAGE_DESC).div_ceil(PAGE) * PAGE;
    let fit = size.saturating_sub(start) / PAGE;
    if fit < pages {
        pages = fit;
    }
    pages
}

/// The most states of `node` bytes a zone of `size` bytes can hold (nothing else allocated).
pub fn most(size: u64, node: u64) -> u64 {
    let pages = pages(size);
    match class(node) {
        Class::Pages(p) => pages / p,
        Class::Chunk(i) => pages * per_page(i),
    }
}

impl Slab {
    /// What [`Slab::new`] takes of a region.
    pub const BYTES: usize = std::mem::size_of::<shm::Mutex<Used>>() + 16;

    /// A zone of `size` bytes with the module's own allocations (`reserved`, in bytes) made,
    /// its bookkeeping laid out by `carver`.
    pub fn new(size: u64, reserved: &[u64], carver: &mut Carver) -> Slab {
        let slab = Slab {
            pages: pages(size),
            used: carver.mutex(Used::default()),
        };
        for r in reserved {
            slab.alloc(*r);
        }
        slab
    }

    fn used(&self) -> shm::MutexGuard<'_, Used> {
        self.used.lock()
    }

    /// Takes room for `size` bytes; false when the zone is full.
    pub fn alloc(&self, size: u64) -> bool {
        let c = class(size);
        let mut used = self.used();
        used.add(c, 1);
        if used.pages() > self.pages {
            used.add(c, -1);
            return false;
        }
        true
    }

    /// Gives back what [`Slab::alloc`] took for `size` bytes.
    pub fn free(&self, size: u64) {
        self.used().add(class(size), -1);
    }

    /// How many more allocations of `size` bytes fit now (for tests and diagnostics).
    pub fn room_for(&self, size: u64) -> u64 {
        let c = class(size);
        let used = self.used();
        let free_pages = self.pages.saturating_sub(used.pages());
        match c {
            Class::Pages(p) => free_pages / p,
            Class::Chunk(i) => {
                let n = used.chunks[i];
                let spare = n.div_ceil(per_page(i)) * per_page(i) - n;
                spare + free_pages * per_page(i)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slab(size: u64, reserved: &[u64]) -> Slab {
        let region = shm::Region::new("t", Slab::BYTES).unwrap();
        Slab::new(size, reserved, &mut Carver::new(region))
    }

    /// The figures measured with nginx 1.22 (see the module's doc).
    #[test]
    fn holds_what_nginx_holds() {
        // limit_req: the tree (80 bytes) and " in limit_req zone \"z32\"" (25).
        let req = |size, key: u64| slab(size, &[80, 25]).room_for(80 + key);
        assert_eq!(req(32 * 1024, 4), 191);
        assert_eq!(req(32 * 1024, 48), 191);
        assert_eq!(req(32 * 1024, 49), 80);
        assert_eq!(req(32 * 1024, 176), 80);
        assert_eq!(req(32 * 1024, 177), 40);
        assert_eq!(req(64 * 1024, 4), 447);
        assert_eq!(req(64 * 1024, 49), 208);
        // limit_conn: the tree (64) and " in limit_conn_zone \"c32\"" (26).
        let conn = slab(32 * 1024, &[64, 26]);
        assert_eq!(conn.room_for(36 + 201), 80);
    }

    #[test]
    fn pages_of_common_sizes() {
        assert_eq!(pages(32 * 1024), 7);
        assert_eq!(pages(64 * 1024), 15);
        assert_eq!(pages(1024 * 1024), 254);
        assert_eq!(pages(10 * 1024 * 1024), 2544);
        assert_eq!(pages(100), 0);
    }

    #[test]
    fn alloc_until_full_then_free() {
        let s = slab(32 * 1024, &[80, 25]);
        let mut n = 0;
        while s.alloc(84) {
            n += 1;
        }
        assert_eq!(n, 191);
        assert!(
            !s.alloc(200),
            "a bigger class needs a page and none is free"
        );
        s.free(84);
        assert!(s.alloc(84));
        // Freeing whole pages' worth of small chunks makes room for other classes.
        for _ in 0..96 {
            s.free(84);
        }
        assert!(s.alloc(200));
        assert!(s.alloc(5000), "two pages of the three freed");
        assert!(s.alloc(200), "a chunk of the 256 page");
        assert!(!s.alloc(84), "the 128 pages are full");
    }

    #[test]
    fn classes() {
        assert_eq!(class(1), Class::Chunk(0));
        assert_eq!(class(84), Class::Chunk(4));
        assert_eq!(class(128), Class::Chunk(4));
        assert_eq!(class(129), Class::Chunk(5));
        assert_eq!(class(2048), Class::Chunk(8));
        assert_eq!(class(2049), Class::Pages(1));
        assert_eq!(class(8193), Class::Pages(3));
        assert_eq!(per_page(0), 504);
        assert_eq!(per_page(1), 254);
        assert_eq!(per_page(2), 127);
        assert_eq!(per_page(3), 64);
        assert_eq!(per_page(8), 2);
    }
}
