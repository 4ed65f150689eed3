use super::keeper::load;
use super::*;

fn conf(dir: &Path, zone_size: u64) -> Arc<CachePathConf> {
    Arc::new(CachePathConf {
        path: dir.to_path_buf(),
        levels: vec![1, 2],
        zone: "z".into(),
        zone_size,
        inactive: Duration::from_secs(600),
        max_size: None,
        min_free: 0,
        use_temp_path: false,
        manager_files: 100,
        manager_sleep: Duration::from_millis(50),
        manager_threshold: Duration::from_millis(200),
        loader_files: 100,
        loader_sleep: Duration::from_millis(1),
        loader_threshold: Duration::from_millis(200),
        temp_path: dir.join("tmp"),
        span: shoal_conf::Span {
            file: None,
            line: 0,
        },
    })
}

#[test]
fn levels_come_from_the_end_of_the_name() {
    let c = conf(Path::new("/c"), 1 << 20);
    let k = md5::unhex("b7f54b2df7773722d382f4809d65029c").unwrap();
    assert_eq!(
        path_in(&c, &k),
        Path::new("/c/c/29/b7f54b2df7773722d382f4809d65029c")
    );
}

#[test]
fn the_zone_size_bounds_the_keys_and_the_oldest_go() {
    // 8 KiB: 64 keys, 4 per shard.
    let z = Zone::new(conf(Path::new("/nonexistent"), 8192));
    let keys: Vec<[u8; 16]> = (0..200u32).map(|i| md5::md5(&i.to_le_bytes())).collect();
    for k in &keys {
        z.touch(k);
    }
    assert!(z.entries() <= 64, "{}", z.entries());
    // The last one touched is there, the first is not.
    assert!(z.peek(keys.last().unwrap()).is_some());
    assert!(z.peek(&keys[0]).is_none());
}

#[test]
fn bytes_follow_stores_and_removals_and_lru_eviction_takes_the_oldest() {
    let z = Zone::new(conf(Path::new("/nonexistent"), 1 << 20));
    let a = md5::md5(b"a");
    let b = md5::md5(b"b");
    z.touch(&a);
    z.stored(&a, 100, 1);
    z.touch(&b);
    z.stored(&b, 50, 1);
    assert_eq!(z.bytes(), 150);
    z.touch(&a);
    let (p, size) = z.evict_lru().unwrap();
    assert_eq!(size, 50);
    assert!(p.ends_with(md5::hex(&b)));
    assert_eq!(z.bytes(), 100);
    assert!(z.remove(&a));
    assert_eq!(z.bytes(), 0);
}

/// Keys of one shard (the shard is the digest's last byte).
fn same_shard(n: usize) -> Vec<[u8; 16]> {
    (0..10_000u32)
        .map(|i| md5::md5(&i.to_le_bytes()))
        .filter(|k| k[15] as usize % SHARDS == 3)
        .take(n)
        .collect()
}

#[test]
fn a_key_used_again_is_not_the_one_a_full_shard_drops() {
    // 8 KiB: 64 keys, 4 per shard.
    let z = Zone::new(conf(Path::new("/nonexistent"), 8192));
    let k = same_shard(5);
    for key in &k[..4] {
        z.touch(key);
    }
    // The first key is used again: the second is now the least recently used.
    z.touch(&k[0]);
    z.touch(&k[4]);
    assert!(z.peek(&k[0]).is_some());
    assert!(z.peek(&k[1]).is_none());
    assert!(z.peek(&k[4]).is_some());
    assert_eq!(z.peek(&k[0]).unwrap().uses, 2);
}

#[test]
fn inactive_keys_are_found_behind_a_key_used_since() {
    let z = Zone::new(conf(Path::new("/nonexistent"), 1 << 20));
    let k = same_shard(3);
    for key in &k {
        z.touch(key);
    }
    // All three unused for a long time, then the first one used again.
    for key in &k {
        z.shard(key).map.get_mut(key).unwrap().accessed = 0;
    }
    z.touch(&k[0]);
    let mut found = z.inactive_keys(now() - 60, 100);
    found.sort();
    let mut want = vec![k[1], k[2]];
    want.sort();
    assert_eq!(found, want);
    // Nothing is lost or doubled in the order on the way.
    let sh = z.shard(&k[0]);
    assert_eq!(sh.lru.len(), 3);
    assert_eq!(sh.lru.get(&sh.map[&k[0]].stamp), Some(&k[0]));
}

#[test]
fn one_fill_at_a_time() {
    let z = Zone::new(conf(Path::new("/nonexistent"), 1 << 20));
    let a = md5::md5(b"a");
    z.touch(&a);
    assert!(z.begin_update(&a, Some(Duration::from_secs(5))));
    assert!(!z.begin_update(&a, Some(Duration::from_secs(5))));
    assert!(z.begin_update(&a, Some(Duration::ZERO)));
    z.end_update(&a);
    assert!(z.begin_update(&a, Some(Duration::from_secs(5))));
}

#[test]
fn the_loader_finds_objects_and_deletes_leftovers() {
    let dir = tempfile::tempdir().unwrap();
    let c = conf(dir.path(), 1 << 20);
    let k = md5::md5(b"key");
    let p = path_in(&c, &k);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, b"x").unwrap();
    // A fill whose process is gone (a pid that just exited) is a leftover; one of a
    // live process (this one) is a fill in progress.
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let gone = child.id();
    child.wait().unwrap();
    let leftover = p.with_file_name(format!("{}.{gone}.2", md5::hex(&k)));
    std::fs::write(&leftover, b"half").unwrap();
    let filling = p.with_file_name(format!("{}.{}.3", md5::hex(&k), std::process::id()));
    std::fs::write(&filling, b"half").unwrap();
    let z = Zone::new(c);
    load(&z);
    assert!(z.peek(&k).is_some_and(|n| n.exists));
    assert!(!leftover.exists());
    assert!(filling.exists());
    assert!(p.exists());
}
