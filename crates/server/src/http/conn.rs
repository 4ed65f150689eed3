//! placeholder
use std::os::fd::OwnedFd;
use std::sync::Arc;
pub async fn serve(_fd: OwnedFd, _key: crate::listen::SocketKey, _g: Arc<crate::cycle::Generation>, _n: u64, _guard: crate::worker::ConnGuard) {}
