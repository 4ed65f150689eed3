//! Futures built in the memory of their boxes: an HTTP/1 connection's and an HTTP/2 stream's
//! futures are sized by their deepest state (kilobytes), and a task copies a future it holds
//! inline at its spawn, at each change of its stage and at its end.

/// A future built in its box rather than on the stack and copied there (a future's size is
/// that of its largest state, however little its first state holds): the box is allocated
/// first and `make`'s future written into it.
#[inline(always)]
pub(crate) fn pin_in_place<F: std::future::Future>(
    make: impl FnOnce() -> F,
) -> std::pin::Pin<Box<F>> {
    let mut slot = Box::<F>::new_uninit();
    slot.write(make());
    // SAFETY: written just above. (`Box::write`, which says the same, is not in Rust 1.85.)
    Box::into_pin(unsafe { slot.assume_init() })
}
