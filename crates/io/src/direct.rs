//! `directio`: reads that bypass the page cache (`O_DIRECT`), for large files that would only
//! push hot data out of memory. Runs on a pool thread (or inline with `aio off`, as nginx).
//!
//! `O_DIRECT` wants the buffer address, the file offset and the length aligned (nginx's
//! `directio_alignment`, 512 by default; 4096 on some filesystems): the read covers the aligned
//! window around the range and the range is copied out. A filesystem that refuses `O_DIRECT`
//! (tmpfs answers EINVAL) is read normally: it is memory anyway.

use std::alloc::{self, Layout};
use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::pool::ThreadPool;
use crate::syscall;

/// A zeroed heap buffer aligned for `O_DIRECT`.
struct AlignedBuf {
    ptr: NonNull<u8>,
    layout: Layout,
}

impl AlignedBuf {
    fn new(len: usize, align: usize) -> io::Result<AlignedBuf> {
        let layout = Layout::from_size_align(len.max(align), align)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "bad directio alignment"))?;
        // SAFETY: the layout has a non-zero size (at least `align`, which Layout checked is a
        // power of two and non-zero).
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr)
            .ok_or_else(|| io::Error::new(io::ErrorKind::OutOfMemory, "directio buffer"))?;
        Ok(AlignedBuf { ptr, layout })
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr points to layout.size() initialized (zeroed) bytes owned by self, and the
        // &mut self borrow makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: ptr was allocated by alloc_zeroed with this layout and is freed once.
        unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// A file opened for `directio`: with `O_DIRECT`, or normally on a filesystem that refuses
/// it (tmpfs answers EINVAL: it is memory anyway). Opened once per answer, read in pieces.
#[derive(Debug)]
pub struct DirectFile {
    file: File,
    direct: bool,
}

impl DirectFile {
    /// Opens `path` read-only with `O_DIRECT` where the filesystem allows it.
    pub fn open(path: &Path) -> io::Result<DirectFile> {
        match syscall::open_direct(path) {
            Ok(file) => Ok(DirectFile { file, direct: true }),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(DirectFile {
                file: File::open(path)?,
                direct: false,
            }),
            Err(e) => Err(e),
        }
    }

    /// Reads `len` bytes at `off` (fewer if the file ends first). Blocks: call it on a pool
    /// thread, or inline only where blocking is accepted.
    pub fn read_blocking(&self, off: u64, len: usize, align: usize) -> io::Result<Vec<u8>> {
        if !self.direct {
            let mut buf = vec![0; len];
            let n = syscall::pread_full(self.file.as_fd(), &mut buf, off)?;
            buf.truncate(n);
            return Ok(buf);
        }
        let align64 = align as u64;
        let start = off / align64 * align64;
        let end = (off + len as u64).div_ceil(align64) * align64;
        let window = (end - start) as usize;
        let mut buf = AlignedBuf::new(window, align)?;
        let slice = buf.as_mut_slice();
        let mut got = 0usize;
        while got < window {
            let n = syscall::pread(
                self.file.as_fd(),
                &mut slice[got..window],
                start + got as u64,
            )?;
            if n == 0 {
                break;
            }
            got += n;
            if n % align != 0 {
                // A short read that is not a whole block: the end of the file.
                break;
            }
        }
        let from = (off - start) as usize;
        let to = (from + len).min(got);
        Ok(if from >= to {
            Vec::new()
        } else {
            slice[from..to].to_vec()
        })
    }
}

/// Opens the file at `path` for `directio` and reads `len` bytes at `off` (one piece; an
/// answer in several pieces opens once with [`DirectFile::open`]).
pub fn read_direct_blocking(
    path: &Path,
    off: u64,
    len: usize,
    align: usize,
) -> io::Result<Vec<u8>> {
    DirectFile::open(path)?.read_blocking(off, len, align)
}

/// [`DirectFile::read_blocking`] through `pool` when given (the worker waits without
/// blocking), or inline without one (`aio off`).
pub async fn read_direct(
    file: &Arc<DirectFile>,
    off: u64,
    len: usize,
    align: usize,
    pool: Option<&ThreadPool>,
) -> io::Result<Vec<u8>> {
    match pool {
        None => file.read_blocking(off, len, align),
        Some(p) => {
            let file = Arc::clone(file);
            p.post(move || file.read_blocking(off, len, align))?
                .await
                .map_err(io::Error::other)?
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn reads_unaligned_ranges_exactly() {
        let mut f = tempfile::NamedTempFile::new_in("/var/tmp").expect("temp file on disk");
        let data: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
        f.write_all(&data).unwrap();
        f.flush().unwrap();
        for (off, len) in [
            (0u64, 10usize),
            (1, 4095),
            (4095, 2),
            (12_345, 50_000),
            (99_990, 100),
            (200_000, 10),
        ] {
            let got = read_direct_blocking(f.path(), off, len, 4096).unwrap();
            let want: &[u8] = data
                .get(off as usize..(off as usize + len).min(data.len()))
                .unwrap_or(&[]);
            assert_eq!(got, want, "off {off} len {len}");
        }
    }

    #[test]
    fn tmpfs_falls_back_to_ordinary_reads() {
        let mut f = tempfile::NamedTempFile::new_in("/dev/shm").expect("temp file on tmpfs");
        f.write_all(b"hello directio").unwrap();
        assert_eq!(
            read_direct_blocking(f.path(), 6, 8, 512).unwrap(),
            b"directio"
        );
    }

    #[test]
    fn through_a_pool() {
        let mut f = tempfile::NamedTempFile::new_in("/var/tmp").expect("temp file on disk");
        f.write_all(&[42u8; 10_000]).unwrap();
        let pool = ThreadPool::new("direct-test", 1, 4).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let file = Arc::new(DirectFile::open(f.path()).unwrap());
        // One open, several pieces.
        for off in [100u64, 5100, 9000] {
            let got = rt
                .block_on(read_direct(&file, off, 5000, 512, Some(&pool)))
                .unwrap();
            let want = (10_000 - off as usize).min(5000);
            assert_eq!(got, vec![42u8; want]);
        }
    }
}
