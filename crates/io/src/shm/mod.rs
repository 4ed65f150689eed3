//! Memory shared by the processes of one shoal, as nginx's shared memory zones (runs anywhere).
//!
//! A [`Region`] is an anonymous `MAP_SHARED` mapping: made before a `fork()`, the parent and
//! every child see the same bytes at the same address. shoal's root master makes a zone's region
//! when it reads the configuration, so the serving children of successive configurations (the
//! old one draining, the new one serving) count in the same memory, as nginx's workers of two
//! cycles do. What lives in one is plain data: no pointer into a process's heap.
//!
//! A [`Mutex`] in a region is nginx's `ngx_shmtx`: the owner's pid in one word, taken by a
//! compare-and-swap, a short spin, then a futex wait (a shared one: the word is in shared
//! memory). A process killed while it holds one would leave every other waiting forever;
//! [`force_unlock`] is what the master calls when it reaps a child, with the child's pid, and
//! it releases what that child held (nginx's `shared memory zone "NAME" was locked by PID`).
//!
//! A region is reserved with `MAP_NORESERVE` and the kernel gives it pages when they are first
//! touched: a table sized for the worst case costs what it holds.

pub mod lru;

use std::cell::UnsafeCell;
use std::io;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// An anonymous shared mapping, unmapped when the last handle goes.
pub struct Region {
    name: String,
    base: NonNull<u8>,
    len: usize,
    /// Where its locks are, for [`force_unlock`].
    locks: std::sync::Mutex<Vec<usize>>,
    /// The bytes laid out so far, by every [`Carver`] of it: two never hand out one place.
    carved: std::sync::Mutex<usize>,
}

// SAFETY: the mapping is plain memory every thread may address; what is in it synchronises
// itself (atomics, `Mutex`).
unsafe impl Send for Region {}
unsafe impl Sync for Region {}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region")
            .field("name", &self.name)
            .field("len", &self.len)
            .finish()
    }
}

/// Every live region of this process, for [`force_unlock`].
static REGIONS: std::sync::Mutex<Vec<Weak<Region>>> = std::sync::Mutex::new(Vec::new());

impl Region {
    /// A zeroed shared mapping of at least `len` bytes, named `name` for log lines.
    pub fn new(name: &str, len: usize) -> io::Result<Arc<Region>> {
        let len = len.max(1).next_multiple_of(4096);
        // SAFETY: a fresh anonymous mapping; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let region = Arc::new(Region {
            name: name.to_string(),
            base: NonNull::new(p.cast()).expect("mmap gives no null mapping"),
            len,
            locks: std::sync::Mutex::new(Vec::new()),
            carved: std::sync::Mutex::new(0),
        });
        let mut all = REGIONS.lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|r| r.strong_count() > 0);
        all.push(Arc::downgrade(&region));
        Ok(region)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        false
    }

    fn lock_at(&self, offset: usize) -> &Lock {
        // SAFETY: `offset` was recorded by `Carver::mutex`, inside the mapping and aligned.
        unsafe { &*self.base.as_ptr().add(offset).cast::<Lock>() }
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`; no reference into it outlives the last handle
        // (every `Shared` holds one).
        unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// Values that mean the same in every process: plain numbers and what is made of them only.
/// A pointer, reference or handle in shared memory would name one process's memory to all
/// (a `Vec` a child grew points into the child's heap), so a region takes no other.
///
/// ```compile_fail
/// use shoal_io::shm::{Carver, Region};
/// let mut c = Carver::new(Region::new("t", 4096).unwrap());
/// let v = c.mutex(Vec::<u8>::new());
/// ```
///
/// ```compile_fail
/// use shoal_io::shm::{Carver, Region};
/// let mut c = Carver::new(Region::new("t", 4096).unwrap());
/// let s = c.place(std::sync::Mutex::new(String::new()));
/// ```
///
/// # Safety
///
/// The type holds no pointer, reference or handle, and all-zero bytes are a value of it.
pub unsafe trait Plain {}

macro_rules! plain {
    ($($t:ty),*) => { $(
        // SAFETY: a number (or an atomic one): no pointer, and zero is one.
        unsafe impl Plain for $t {}
    )* };
}
plain!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize, bool);
plain!(
    AtomicU32,
    std::sync::atomic::AtomicU64,
    std::sync::atomic::AtomicUsize
);
// SAFETY: made of `T`s only.
unsafe impl<T: Plain, const N: usize> Plain for [T; N] {}

/// Lays out a region's contents at creation: each piece aligned after the previous one (of
/// any carver of the region).
pub struct Carver {
    region: Arc<Region>,
}

impl Carver {
    pub fn new(region: Arc<Region>) -> Carver {
        Carver { region }
    }

    /// The bytes still free.
    pub fn left(&self) -> usize {
        self.region.len - *self.region.carved.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn take<T>(&mut self, n: usize) -> *mut T {
        let mut at = self.region.carved.lock().unwrap_or_else(|e| e.into_inner());
        let align = std::mem::align_of::<T>();
        // (Checked: a count that overflows would wrap to a place inside the mapping.)
        let end = at
            .checked_next_multiple_of(align)
            .and_then(|start| {
                Some((
                    start,
                    start.checked_add(std::mem::size_of::<T>().checked_mul(n)?)?,
                ))
            })
            .filter(|&(_, end)| end <= self.region.len);
        let Some((start, end)) = end else {
            panic!(
                "shared memory zone \"{}\" laid out past its end",
                self.region.name
            );
        };
        *at = end;
        // SAFETY: within the mapping, checked above.
        unsafe { self.region.base.as_ptr().add(start).cast() }
    }

    /// `value` placed in the region.
    pub fn place<T: Sync + Plain>(&mut self, value: T) -> Shared<T> {
        let p = self.take::<T>(1);
        // SAFETY: fresh, aligned, in bounds and ours alone until returned.
        unsafe { p.write(value) };
        Shared {
            ptr: NonNull::new(p).expect("in the mapping"),
            _region: self.region.clone(),
        }
    }

    /// `value` behind a [`Mutex`] in the region.
    pub fn mutex<T: Send + Plain>(&mut self, value: T) -> Shared<Mutex<T>> {
        let m = self.place(Mutex {
            lock: Lock::default(),
            value: UnsafeCell::new(value),
        });
        let offset = m.ptr.as_ptr() as usize - self.region.base.as_ptr() as usize;
        self.region
            .locks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(offset);
        m
    }

    /// `n` zeroed `T`s.
    pub fn zeroed_array<T: Plain>(&mut self, n: usize) -> *mut T {
        // The mapping is zeroed and nothing was placed there before (the region's cursor only
        // moves forward).
        self.take::<T>(n)
    }
}

/// A value in a region, which it keeps mapped.
pub struct Shared<T> {
    ptr: NonNull<T>,
    _region: Arc<Region>,
}

// SAFETY: `T: Sync` is required to place it: shared references to it go to every thread.
unsafe impl<T: Sync> Send for Shared<T> {}
unsafe impl<T: Sync> Sync for Shared<T> {}

impl<T> Deref for Shared<T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: placed by `Carver::place`, mapped while this handle lives.
        unsafe { self.ptr.as_ref() }
    }
}

impl<T> Shared<T> {
    /// The region it is in.
    pub fn region(&self) -> &Arc<Region> {
        &self._region
    }
}

/// nginx's `ngx_shmtx`: 0 when free, else its owner's pid.
#[derive(Default)]
#[repr(C)]
struct Lock {
    owner: AtomicU32,
    waiters: AtomicU32,
}

/// How long one wait sleeps before looking again (a holder that died is released by the
/// master, who wakes nobody).
const WAIT: Duration = Duration::from_millis(50);

impl Lock {
    fn lock(&self) {
        let me = pid();
        loop {
            for _ in 0..64 {
                if self.owner.load(Ordering::Relaxed) == 0
                    && self
                        .owner
                        .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
                {
                    return;
                }
                std::hint::spin_loop();
            }
            self.waiters.fetch_add(1, Ordering::SeqCst);
            let seen = self.owner.load(Ordering::SeqCst);
            if seen != 0 {
                futex_wait(&self.owner, seen, WAIT);
            }
            self.waiters.fetch_sub(1, Ordering::SeqCst);
        }
    }

    fn try_lock(&self) -> bool {
        self.owner
            .compare_exchange(0, pid(), Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    fn unlock(&self) {
        self.owner.store(0, Ordering::Release);
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.waiters.load(Ordering::SeqCst) != 0 {
            futex_wake(&self.owner);
        }
    }
}

fn futex_wait(word: &AtomicU32, seen: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: a futex wait on a live aligned word (shared: no FUTEX_PRIVATE_FLAG) with a valid
    // relative timeout; spurious returns are looped over by the caller.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            seen,
            &ts as *const libc::timespec,
        )
    };
}

fn futex_wake(word: &AtomicU32) {
    // SAFETY: a futex wake on a live aligned word.
    unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, 1) };
}

/// A value under a process-shared lock, in a region.
#[repr(C)]
pub struct Mutex<T> {
    lock: Lock,
    value: UnsafeCell<T>,
}

// SAFETY: a lock word and a waiter count, and a `T` that is plain.
unsafe impl<T: Plain> Plain for Mutex<T> {}

// SAFETY: the lock gives one thread (of any process) the value at a time.
unsafe impl<T: Send> Sync for Mutex<T> {}
unsafe impl<T: Send> Send for Mutex<T> {}

impl<T> Mutex<T> {
    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.lock.lock();
        MutexGuard {
            m: self,
            _not_send: PhantomData,
        }
    }

    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        // (Not `then_some`: a guard made and dropped would release the lock it did not take.)
        self.lock.try_lock().then(|| MutexGuard {
            m: self,
            _not_send: PhantomData,
        })
    }
}

/// A held [`Mutex`]; released when dropped (a panic unwinding through it releases it too).
pub struct MutexGuard<'a, T> {
    m: &'a Mutex<T>,
    /// The owner word holds this process's pid: keep the guard on its thread.
    _not_send: PhantomData<*const ()>,
}

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the lock is held.
        unsafe { &*self.m.value.get() }
    }
}

impl<T> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the lock is held, by this guard alone.
        unsafe { &mut *self.m.value.get() }
    }
}

impl<T> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        self.m.lock.unlock();
    }
}

/// This process's pid, read once per process (a forked child reads its own: the cache is
/// cleared in the child by `pthread_atfork`).
pub fn pid() -> u32 {
    static PID: AtomicU32 = AtomicU32::new(0);
    static HOOK: std::sync::Once = std::sync::Once::new();
    extern "C" fn forget() {
        PID.store(0, Ordering::Relaxed);
    }
    match PID.load(Ordering::Relaxed) {
        0 => {
            HOOK.call_once(|| {
                // SAFETY: registers a handler that only stores to an atomic.
                unsafe { libc::pthread_atfork(None, None, Some(forget)) };
            });
            let p = std::process::id();
            PID.store(p, Ordering::Relaxed);
            p
        }
        p => p,
    }
}

/// Every region this process maps now. The root master keeps those of a child's start with
/// the child, so that a zone a later configuration dropped stays mapped (and its locks within
/// [`force_unlock`]'s reach) while a child that uses it lives.
pub fn live() -> Vec<Arc<Region>> {
    REGIONS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter_map(Weak::upgrade)
        .collect()
}

/// Releases every lock of this process's regions that `dead` (a child just reaped) held;
/// returns the names of their regions, for nginx's `shared memory zone "NAME" was locked by
/// PID` line.
pub fn force_unlock(dead: u32) -> Vec<String> {
    let regions = live();
    let mut names = Vec::new();
    for r in regions {
        let offsets = r.locks.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for off in offsets {
            let lock = r.lock_at(off);
            if lock
                .owner
                .compare_exchange(dead, 0, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
            {
                futex_wake(&lock.owner);
                if names.last() != Some(&r.name) {
                    names.push(r.name.clone());
                }
            }
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_regions_are_listed_while_held() {
        let r = Region::new("listed", 4096).unwrap();
        let ptr = Arc::as_ptr(&r);
        assert!(live().iter().any(|l| Arc::as_ptr(l) == ptr));
        let kept = live();
        drop(r);
        assert!(
            live().iter().any(|l| Arc::as_ptr(l) == ptr),
            "held by `kept`"
        );
        drop(kept);
        assert!(!live().iter().any(|l| Arc::as_ptr(l) == ptr));
    }

    #[test]
    fn a_forked_child_writes_what_the_parent_reads() {
        let region = Region::new("t", 100).unwrap();
        assert_eq!(region.len(), 4096);
        let mut c = Carver::new(region);
        let m = c.mutex(0u64);
        let arr: *mut u64 = c.zeroed_array(8);
        // SAFETY: fork in a test; the child only touches the shared memory and exits.
        let child = unsafe { libc::fork() };
        if child == 0 {
            for _ in 0..1000 {
                *m.lock() += 1;
            }
            // SAFETY: within the 8 placed.
            unsafe { *arr.add(3) = std::process::id() as u64 };
            // SAFETY: ends the child without running the test harness's exit paths.
            unsafe { libc::_exit(0) };
        }
        for _ in 0..1000 {
            *m.lock() += 1;
        }
        let mut status = 0;
        // SAFETY: our child, a valid status pointer.
        unsafe { libc::waitpid(child, &mut status, 0) };
        assert_eq!(*m.lock(), 2000);
        // SAFETY: within the 8 placed.
        assert_eq!(unsafe { *arr.add(3) }, child as u64);
    }

    #[test]
    fn a_dead_holders_lock_is_released_by_force() {
        let region = Region::new("zone_x", 4096).unwrap();
        let m = Carver::new(region).mutex(7u32);
        // SAFETY: fork in a test; the child takes the lock and dies holding it.
        let child = unsafe { libc::fork() };
        if child == 0 {
            std::mem::forget(m.lock());
            // SAFETY: ends the child at once.
            unsafe { libc::_exit(0) };
        }
        let mut status = 0;
        // SAFETY: our child, a valid status pointer.
        unsafe { libc::waitpid(child, &mut status, 0) };
        assert!(m.try_lock().is_none(), "held by the dead child");
        let owner = m.lock.owner.load(Ordering::Relaxed);
        assert_eq!(owner, child as u32, "parent {}", pid());
        assert!(force_unlock(pid() + 1_000_000).is_empty());
        let names = force_unlock(child as u32);
        assert!(names.contains(&"zone_x".to_string()), "{names:?}");
        assert_eq!(*m.lock(), 7);
    }

    /// Two carvers of one region hand out different places (each once started at 0, and a
    /// second `place` wrote over the first one's value).
    #[test]
    fn two_carvers_of_one_region_do_not_overlap() {
        let region = Region::new("t", 4096).unwrap();
        let a = Carver::new(region.clone()).place(1u64);
        let b = Carver::new(region.clone()).mutex(2u64);
        let c: *mut u64 = Carver::new(region).zeroed_array(4);
        assert_eq!(*a, 1);
        assert_eq!(*b.lock(), 2);
        // SAFETY: within the 4 placed.
        assert_eq!(unsafe { *c.add(0) }, 0, "zeroed, not a placed value");
    }

    /// A count whose size overflows is refused, not wrapped to a place inside the mapping.
    #[test]
    #[should_panic(expected = "laid out past its end")]
    fn an_overflowing_array_is_refused() {
        let mut c = Carver::new(Region::new("t", 4096).unwrap());
        let _ = c.place(1u8);
        let _: *mut u64 = c.zeroed_array(usize::MAX / 4);
    }

    /// A thread that panics holding a lock releases it as it unwinds (what it changed stays:
    /// there is no poisoning, as in nginx).
    #[test]
    fn a_panicking_holder_releases_the_lock() {
        let m = Carver::new(Region::new("t", 4096).unwrap()).mutex(0u32);
        let r = std::thread::scope(|s| {
            s.spawn(|| {
                let mut g = m.lock();
                *g = 5;
                panic!("while holding");
            })
            .join()
        });
        assert!(r.is_err());
        assert_eq!(m.lock.owner.load(Ordering::Relaxed), 0);
        assert_eq!(*m.try_lock().expect("released"), 5);
    }

    #[test]
    fn threads_contend_on_one_lock() {
        let m = Carver::new(Region::new("t", 4096).unwrap()).mutex(0u64);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..10_000 {
                        *m.lock() += 1;
                    }
                });
            }
        });
        assert_eq!(*m.lock(), 40_000);
    }
}
