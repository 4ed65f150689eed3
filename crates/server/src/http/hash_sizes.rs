//! The sizes nginx gives its static hash tables and memory pools: `server_names_hash_*`,
//! `variables_hash_*`, `types_hash_*`, `map_hash_*`, `proxy_headers_hash_*`,
//! `connection_pool_size` and `request_pool_size`.
//!
//! They size nothing in shoal: its tables grow as they need and it has no pools. They are
//! accepted and checked as nginx checks them, so a configuration nginx refuses is refused
//! here too, in its words: the values (`invalid number`, `the pool size must be no less than
//! 112`), and, where nginx builds the table, a size of 0, a bucket over 65472 bytes once
//! rounded to 64, or a key too long for its bucket (`could not build map_hash, you should
//! increase map_hash_bucket_size: 64`). Not reproduced: nginx's `could not build optimal ...`
//! warnings (they need nginx's own variable and header lists), and the key check of
//! `variables_hash`.

use shoal_conf::{Directive, Error};

use super::loc_conf;
use crate::conf::{err, merge, number_arg, set_once, size_arg, Args, Builder, Command, Ctx, Scope};

const HS: Ctx = Ctx::HTTP.or(Ctx::SERVER);

pub static DIRECTIVES: &[Command] = &[
    Command::new("server_names_hash_max_size", Ctx::HTTP, Args::ONE, set_num),
    Command::new(
        "server_names_hash_bucket_size",
        Ctx::HTTP,
        Args::ONE,
        set_num,
    ),
    Command::new("variables_hash_max_size", Ctx::HTTP, Args::ONE, set_num),
    Command::new("variables_hash_bucket_size", Ctx::HTTP, Args::ONE, set_num),
    Command::new("types_hash_max_size", Ctx::HSL, Args::ONE, set_num),
    Command::new("types_hash_bucket_size", Ctx::HSL, Args::ONE, set_num),
    Command::new("map_hash_max_size", Ctx::HTTP, Args::ONE, set_num),
    Command::new("map_hash_bucket_size", Ctx::HTTP, Args::ONE, set_num),
    Command::new("proxy_headers_hash_max_size", Ctx::HSL, Args::ONE, set_num),
    Command::new(
        "proxy_headers_hash_bucket_size",
        Ctx::HSL,
        Args::ONE,
        set_num,
    ),
    Command::new("connection_pool_size", HS, Args::ONE, set_pool_size),
    Command::new("request_pool_size", HS, Args::ONE, set_pool_size),
];

/// One table's limits (`NAME_max_size`, `NAME_bucket_size`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Limits {
    pub max: Option<u64>,
    pub bucket: Option<u64>,
}

impl Limits {
    fn merge(&mut self, parent: &Limits) {
        merge(&mut self.max, &parent.max);
        merge(&mut self.bucket, &parent.bucket);
    }
}

/// The settings of one level.
#[derive(Clone, Debug, Default)]
pub struct SizesLoc {
    pub server_names: Limits,
    pub variables: Limits,
    pub types: Limits,
    pub map: Limits,
    pub proxy_headers: Limits,
    pub connection_pool: Option<u64>,
    pub request_pool: Option<u64>,
    /// The longest extension of this level's own `types` block (not inherited): nginx builds
    /// the table where the block is.
    pub own_types: Option<usize>,
}

fn limits<'a>(s: &'a mut Scope<'_>, name: &str) -> &'a mut Option<u64> {
    let l = &mut loc_conf(s).hash_sizes;
    let (table, part) = name.rsplit_once("_hash_").expect("a hash directive");
    let t = match table {
        "server_names" => &mut l.server_names,
        "variables" => &mut l.variables,
        "types" => &mut l.types,
        "map" => &mut l.map,
        _ => &mut l.proxy_headers,
    };
    if part == "max_size" {
        &mut t.max
    } else {
        &mut t.bucket
    }
}

/// nginx's `ngx_conf_set_num_slot`: a number, else `invalid number`.
fn set_num(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = number_arg(d, 0)?;
    set_once(limits(s, &d.name), n, d)
}

/// nginx's smallest pool (its pool header and two large-block records, on 64-bit Linux).
const MIN_POOL_SIZE: u64 = 112;
/// Its pools' alignment.
const POOL_ALIGNMENT: u64 = 16;

/// `connection_pool_size`, `request_pool_size`: a size of at least 112, a multiple of 16.
fn set_pool_size(_: &mut Builder, d: &Directive, s: &mut Scope<'_>) -> Result<(), Error> {
    let n = size_arg(d, 0)?;
    if n < MIN_POOL_SIZE {
        return Err(err(
            d,
            format!("the pool size must be no less than {MIN_POOL_SIZE}"),
        ));
    }
    if n % POOL_ALIGNMENT != 0 {
        return Err(err(
            d,
            format!("the pool size must be a multiple of {POOL_ALIGNMENT}"),
        ));
    }
    let l = &mut loc_conf(s).hash_sizes;
    let slot = if d.name == "connection_pool_size" {
        &mut l.connection_pool
    } else {
        &mut l.request_pool
    };
    set_once(slot, n, d)
}

/// The hash sizes' place in the module list (their directives).
pub struct Module;

impl super::modules::HttpModule for Module {
    type Loc = SizesLoc;
    const DIRECTIVES: &'static [Command] = DIRECTIVES;

    fn merge(loc: &mut SizesLoc, parent: &SizesLoc) {
        loc.server_names.merge(&parent.server_names);
        loc.variables.merge(&parent.variables);
        loc.types.merge(&parent.types);
        loc.map.merge(&parent.map);
        loc.proxy_headers.merge(&parent.proxy_headers);
        merge(&mut loc.connection_pool, &parent.connection_pool);
        merge(&mut loc.request_pool, &parent.request_pool);
    }
}

/// A cache line: nginx rounds bucket sizes up to it.
const CACHELINE: u64 = 64;

/// nginx's `ngx_hash_init` checks for a table `name` of keys `key_lens` (lengths in bytes):
/// a size of 0, a bucket too large once rounded to a cache line, a key too long for a bucket.
pub fn check(name: &str, max: u64, bucket: u64, key_lens: &[usize]) -> Result<(), Error> {
    let fail = |m: String| Err(Error::new(format!("could not build {name}, {m}"), None));
    if max == 0 {
        return fail(format!("you should increase {name}_max_size: 0"));
    }
    let bucket = bucket.div_ceil(CACHELINE) * CACHELINE;
    if bucket > 65536 - CACHELINE {
        return fail(format!("too large {name}_bucket_size: {bucket}"));
    }
    // An element is a pointer and the key (with its length, rounded to a pointer); a bucket
    // ends with a pointer.
    let fits = |len: usize| 8 + (len as u64 + 2).div_ceil(8) * 8 + 8 <= bucket;
    if bucket == 0 || !key_lens.iter().all(|&l| fits(l)) {
        return fail(format!("you should increase {name}_bucket_size: {bucket}"));
    }
    Ok(())
}

/// The tables nginx builds at one merged level: its own `types` block's (and the http level's,
/// of its longest extension `http_types`), and the proxy's header table at the http and server
/// levels (`top`).
pub fn check_level(loc: &SizesLoc, http_types: Option<usize>, top: bool) -> Result<(), Error> {
    if let Some(longest) = loc.own_types.or(http_types) {
        check(
            "types_hash",
            loc.types.max.unwrap_or(1024),
            loc.types.bucket.unwrap_or(64),
            &[longest],
        )?;
    }
    if top {
        check(
            "proxy_headers_hash",
            loc.proxy_headers.max.unwrap_or(512),
            loc.proxy_headers.bucket.unwrap_or(64),
            &[],
        )?;
    }
    Ok(())
}

/// The variables' table, always built.
pub fn check_variables(http: &SizesLoc) -> Result<(), Error> {
    check(
        "variables_hash",
        http.variables.max.unwrap_or(1024),
        http.variables.bucket.unwrap_or(64),
        &[],
    )
}

/// A `map` block's table, built when the block ends with the sizes set so far (they are
/// fixed from then on: a later `map_hash_*` is a duplicate, as in nginx). `keys`: its exact
/// keys' lengths and its wildcards' labels'.
pub fn check_map(http: &mut SizesLoc, keys: &[usize]) -> Result<(), Error> {
    let max = *http.map.max.get_or_insert(2048);
    let bucket = *http.map.bucket.get_or_insert(64);
    if keys.is_empty() {
        return Ok(());
    }
    check("map_hash", max, bucket, keys)
}

/// The server names' table of an address that several servers share, with their exact names.
pub fn check_server_names(http: &SizesLoc, names: &[usize]) -> Result<(), Error> {
    if names.is_empty() {
        return Ok(());
    }
    check(
        "server_names_hash",
        http.server_names.max.unwrap_or(512),
        http.server_names.bucket.unwrap_or(64),
        names,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nginx_s_limits() {
        let msg = |r: Result<(), Error>| r.unwrap_err().message;
        assert_eq!(
            msg(check("map_hash", 0, 0, &[1])),
            "could not build map_hash, you should increase map_hash_max_size: 0"
        );
        assert_eq!(
            msg(check("types_hash", 1, 65473, &[])),
            "could not build types_hash, too large types_hash_bucket_size: 65536"
        );
        assert!(check("types_hash", 1, 65409, &[3]).is_ok());
        assert_eq!(
            msg(check("map_hash", 2048, 0, &[1])),
            "could not build map_hash, you should increase map_hash_bucket_size: 0"
        );
        assert!(check("map_hash", 2048, 64, &[46]).is_ok());
        assert_eq!(
            msg(check("map_hash", 2048, 64, &[47])),
            "could not build map_hash, you should increase map_hash_bucket_size: 64"
        );
        assert!(check("map_hash", 2048, 1, &[46]).is_ok());
    }
}
