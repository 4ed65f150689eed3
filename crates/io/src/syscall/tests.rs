//! The system calls' tests, against real files and sockets.

use super::*;
use std::io::Write;
use std::os::fd::AsFd;

fn temp_on_disk(data: &[u8]) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new_in("/var/tmp").expect("temp file in /var/tmp");
    f.write_all(data).expect("write temp file");
    f.flush().expect("flush");
    f
}

#[test]
fn pread_and_nowait_read_a_hot_file() {
    let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    let f = temp_on_disk(&data);
    let fd = f.as_file().as_fd();
    let mut buf = vec![0; 100];
    assert_eq!(pread(fd, &mut buf, 1000).unwrap(), 100);
    assert_eq!(buf, data[1000..1100]);
    let mut buf = vec![0; 4096];
    assert_eq!(preadv2_nowait(fd, &mut buf, 10).unwrap(), NowaitRead::Full);
    assert_eq!(buf, data[10..4106]);
    // Past the end: a short read, the tail of the file.
    let mut buf = vec![0; 4096];
    assert_eq!(
        preadv2_nowait(fd, &mut buf, 9000).unwrap(),
        NowaitRead::Short(1000)
    );
    assert_eq!(buf[..1000], data[9000..]);
    assert_eq!(
        preadv2_nowait(fd, &mut buf, 20_000).unwrap(),
        NowaitRead::Short(0)
    );
}

#[test]
fn cachestat_counts_pages_of_a_hot_file() {
    let page = page_size() as usize;
    let f = temp_on_disk(&vec![7u8; 5 * page + 1]);
    let fd = f.as_file().as_fd();
    match cachestat(fd, 0, 0).unwrap() {
        Cachestat::Stat(st) => assert_eq!(st.nr_cache, 6, "{st:?}"),
        Cachestat::Unsupported => panic!("cachestat is expected on this kernel (>= 6.5)"),
    }
    assert!(cachestat_in_kernel());
    // A range past the end counts nothing.
    match cachestat(fd, 100 * page as u64, page as u64).unwrap() {
        Cachestat::Stat(st) => assert_eq!(st.nr_cache, 0),
        Cachestat::Unsupported => unreachable!("supported a line above"),
    }
}

#[test]
fn fstat_and_fs_type() {
    let f = temp_on_disk(b"hello");
    let st = fstat(f.as_file().as_fd()).unwrap();
    assert_eq!(st.size, 5);
    assert!(st.is_file && !st.is_dir);
    assert_ne!(fs_type(f.as_file().as_fd()).unwrap(), TMPFS_MAGIC);
    let shm = tempfile::NamedTempFile::new_in("/dev/shm").expect("temp file in /dev/shm");
    assert_eq!(fs_type(shm.as_file().as_fd()).unwrap(), TMPFS_MAGIC);
}

#[test]
fn fadvise_accepts_all_advice() {
    let f = temp_on_disk(&[1; 8192]);
    for advice in [
        Advice::Sequential,
        Advice::Random,
        Advice::WillNeed,
        Advice::DontNeed,
    ] {
        fadvise(f.as_file().as_fd(), 0, 0, advice).unwrap();
    }
}

#[test]
fn tcp_cork_and_nodelay_toggle() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let fd = client.as_fd();
    set_tcp_cork(fd, true).unwrap();
    assert!(tcp_cork(fd).unwrap());
    set_tcp_cork(fd, false).unwrap();
    assert!(!tcp_cork(fd).unwrap());
    set_tcp_nodelay(fd, true).unwrap();
    assert!(tcp_nodelay(fd).unwrap());
    set_tcp_nodelay(fd, false).unwrap();
    assert!(!tcp_nodelay(fd).unwrap());
}

#[test]
fn open_direct_reads_aligned_blocks() {
    let page = page_size() as usize;
    let data: Vec<u8> = (0..4 * page).map(|i| (i % 253) as u8).collect();
    let f = temp_on_disk(&data);
    f.as_file().sync_all().unwrap();
    let direct = open_direct(f.path()).expect("O_DIRECT on ext4");
    // O_DIRECT needs an aligned buffer: carve one out of a bigger Vec.
    let mut raw = vec![0u8; 3 * page];
    let start = raw.as_ptr().align_offset(page);
    let buf = &mut raw[start..start + page];
    assert_eq!(pread(direct.as_fd(), buf, page as u64).unwrap(), page);
    assert_eq!(buf, &data[page..2 * page]);
}

#[test]
fn nothing_to_read_tells_an_idle_socket_from_data_or_eof() {
    use std::io::Write;
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut a = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (b, _) = l.accept().unwrap();
    assert!(nothing_to_read(b.as_fd()));
    a.write_all(b"x").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while nothing_to_read(b.as_fd()) {
        assert!(
            std::time::Instant::now() < deadline,
            "the byte never arrived"
        );
    }
    let mut one = [0u8; 1];
    std::io::Read::read_exact(&mut &b, &mut one).unwrap();
    assert!(
        nothing_to_read(b.as_fd()),
        "a peek does not consume, the read did"
    );
    drop(a);
    while nothing_to_read(b.as_fd()) {
        assert!(
            std::time::Instant::now() < deadline,
            "the EOF never arrived"
        );
    }
}

mod inotify {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_held_file_written_in_place_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"one").unwrap();
        let held = File::open(&path).unwrap();
        let ino = inotify_init().unwrap();
        let wd =
            inotify_watch_fd(ino.as_fd(), held.as_fd(), libc::IN_MODIFY | libc::IN_ATTRIB).unwrap();
        assert_eq!(inotify_read(ino.as_fd()).unwrap(), vec![]);
        std::fs::write(&path, b"two, longer").unwrap();
        let events = inotify_read(ino.as_fd()).unwrap();
        assert!(
            events
                .iter()
                .any(|e| e.wd == wd && e.mask & libc::IN_MODIFY != 0),
            "{events:?}"
        );
        inotify_unwatch(ino.as_fd(), wd);
    }
}

#[test]
fn a_framed_read_leaves_a_gap_before_each_piece() {
    let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    let f = temp_on_disk(&data);
    let mut out = b"before".to_vec();
    pread_framed(f.as_file().as_fd(), &mut out, 100, 2500, 1000, 9).expect("read");
    let mut want = b"before".to_vec();
    for piece in data[100..2600].chunks(1000) {
        want.extend_from_slice(&[0; 9]);
        want.extend_from_slice(piece);
    }
    assert_eq!(out, want);
    // A file that ends first: nothing appended.
    let err = pread_framed(f.as_file().as_fd(), &mut out, 9_000, 2000, 1000, 9).unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    assert_eq!(out, want);
    // More pieces than one preadv takes (UIO_MAXIOV).
    let mut many = Vec::new();
    pread_framed(f.as_file().as_fd(), &mut many, 0, 10_000, 7, 1).expect("read");
    let want: Vec<u8> = data
        .chunks(7)
        .flat_map(|p| [&[0][..], p].concat())
        .collect();
    assert_eq!(many, want);
}
