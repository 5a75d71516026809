//! Compiled kernels kept on disk between processes.
//!
//! NVRTC takes 0.1-3.6 s to compile one of strata's kernels on an H200. It
//! does that on each kernel's first use in every process. So a program's
//! first steps, or a test binary, could spend a minute compiling. PyTorch keeps
//! its jiterator's kernels in `~/.cache/torch/kernels` for the same reason.
//! strata keeps each CUBIN it compiles in a folder:
//!
//! - `STRATA_KERNEL_CACHE_PATH`, when set;
//! - otherwise `$XDG_CACHE_HOME/strata/kernels`;
//! - otherwise `$HOME/.cache/strata/kernels`.
//!
//! `STRATA_KERNEL_CACHE=0` (or `false`, `off`, `no`) turns the cache off.
//!
//! An entry's file name holds a 128-bit hash of everything that decides the
//! CUBIN: the generated source, the architecture (`sm_90`), the compiler
//! options, the NVRTC version and this format's version. A changed kernel
//! therefore never meets an old entry. The kernel's name is in the file name
//! too, for whoever looks in the folder.
//!
//! An entry is written to a temporary file and renamed into place, so a
//! reader never sees a partial one, even with several processes at once. A
//! file that is not an ELF image is ignored and removed. If the driver
//! refuses a CUBIN read from disk, the caller drops the entry and compiles
//! again (`nvrtc.rs`). The cache is best effort: when the folder cannot be
//! created, read or written, kernels are compiled as if there were no cache.

use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Bumped whenever what an entry holds changes meaning.
const FORMAT: &[u8] = b"strata-kernel-cache-1";

/// The first bytes of every ELF image (a CUBIN is one).
const ELF_MAGIC: &[u8] = b"\x7fELF";

/// A folder of compiled kernels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct KernelCache {
    dir: PathBuf,
}

impl KernelCache {
    /// The cache the process environment asks for, or `None` when it is
    /// turned off or no folder can be named.
    pub fn from_env() -> Option<KernelCache> {
        Self::from_vars(|k| std::env::var_os(k))
    }

    /// [`from_env`](Self::from_env) over any source of variables.
    pub fn from_vars(var: impl Fn(&str) -> Option<OsString>) -> Option<KernelCache> {
        let set = |k: &str| var(k).filter(|v| !v.is_empty());
        if let Some(v) = set("STRATA_KERNEL_CACHE") {
            let v = v.to_string_lossy().to_ascii_lowercase();
            if matches!(v.trim(), "0" | "false" | "off" | "no") {
                return None;
            }
        }
        let dir = if let Some(p) = set("STRATA_KERNEL_CACHE_PATH") {
            PathBuf::from(p)
        } else if let Some(x) = set("XDG_CACHE_HOME") {
            Path::new(&x).join("strata").join("kernels")
        } else {
            Path::new(&set("HOME")?)
                .join(".cache")
                .join("strata")
                .join("kernels")
        };
        Some(KernelCache { dir })
    }

    /// A cache in `dir`.
    #[cfg(test)]
    pub fn at(dir: impl Into<PathBuf>) -> KernelCache {
        KernelCache { dir: dir.into() }
    }

    /// The file of the kernel `name` whose CUBIN is decided by `parts` (the
    /// source, the architecture, the options, the compiler's version).
    pub fn entry(&self, name: &str, parts: &[&[u8]]) -> PathBuf {
        let readable: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' {
                    c
                } else {
                    '-'
                }
            })
            .take(64)
            .collect();
        let (a, b) = hash128(parts);
        self.dir.join(format!("{readable}-{a:016x}{b:016x}.cubin"))
    }

    /// The CUBIN at `path`, if there is a well-formed one.
    pub fn load(&self, path: &Path) -> Option<Vec<u8>> {
        let bytes = std::fs::read(path).ok()?;
        if well_formed(&bytes) {
            Some(bytes)
        } else {
            self.remove(path);
            None
        }
    }

    /// Keeps `cubin` at `path` (best effort).
    pub fn store(&self, path: &Path, cubin: &[u8]) {
        if std::fs::create_dir_all(&self.dir).is_err() {
            return;
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let tmp = path.with_extension(format!(
            "tmp.{}.{:?}.{nanos}",
            std::process::id(),
            std::thread::current().id()
        ));
        let written = std::fs::File::create(&tmp).and_then(|mut f| {
            f.write_all(cubin)?;
            f.sync_all()
        });
        if written.is_err() || std::fs::rename(&tmp, path).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }

    /// Forgets the entry at `path` (best effort).
    pub fn remove(&self, path: &Path) {
        let _ = std::fs::remove_file(path);
    }
}

/// Whether `bytes` is a 64-bit little-endian ELF image whose header, program
/// headers and section headers lie within it. `cuModuleLoadData` takes no
/// length and reads as far as the header says, so a truncated file must never
/// reach it.
fn well_formed(bytes: &[u8]) -> bool {
    const HEADER: usize = 64;
    if bytes.len() < HEADER || !bytes.starts_with(ELF_MAGIC) || bytes[4] != 2 || bytes[5] != 1 {
        return false;
    }
    let u16_at = |o: usize| u16::from_le_bytes([bytes[o], bytes[o + 1]]) as u64;
    let u64_at = |o: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&bytes[o..o + 8]);
        u64::from_le_bytes(b)
    };
    let within = |offset: u64, entry: u64, count: u64| {
        entry
            .checked_mul(count)
            .and_then(|n| n.checked_add(offset))
            .is_some_and(|end| end <= bytes.len() as u64)
    };
    within(u64_at(0x20), u16_at(0x36), u16_at(0x38))
        && within(u64_at(0x28), u16_at(0x3A), u16_at(0x3C))
}

/// Two independent 64-bit FNV-1a hashes of `parts` (each part's length goes
/// in first, so that moving bytes between parts changes the hash) and of
/// [`FORMAT`]. Stable across Rust versions and platforms, unlike `std`'s
/// hashers.
fn hash128(parts: &[&[u8]]) -> (u64, u64) {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut a: u64 = 0xcbf2_9ce4_8422_2325;
    let mut b: u64 = 0x6c62_272e_07bb_0142;
    let mut eat = |bytes: &[u8]| {
        for &x in bytes {
            a = (a ^ x as u64).wrapping_mul(PRIME);
            b = (b ^ x.rotate_left(3) as u64)
                .wrapping_mul(PRIME)
                .rotate_left(5);
        }
    };
    eat(FORMAT);
    for p in parts {
        eat(&(p.len() as u64).to_le_bytes());
        eat(p);
    }
    (a, b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn vars(v: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> {
        let m: HashMap<String, OsString> = v
            .iter()
            .map(|(k, x)| (k.to_string(), OsString::from(x)))
            .collect();
        move |k| m.get(k).cloned()
    }

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "strata-kernel-cache-test-{tag}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    /// A minimal 64-bit little-endian ELF image of `len` bytes whose
    /// section headers (`shnum` of 64 bytes) start at `shoff`.
    fn image(len: usize, shoff: u64, shnum: u16) -> Vec<u8> {
        let mut v = vec![0u8; len];
        v[..4].copy_from_slice(ELF_MAGIC);
        v[4] = 2;
        v[5] = 1;
        v[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
        v[0x3A..0x3C].copy_from_slice(&64u16.to_le_bytes());
        v[0x3C..0x3E].copy_from_slice(&shnum.to_le_bytes());
        v
    }

    #[test]
    fn only_whole_elf_images_pass() {
        assert!(well_formed(&image(64 + 3 * 64, 64, 3)));
        // Truncated: the section headers run past the end.
        assert!(!well_formed(&image(64 + 2 * 64, 64, 3)));
        // Offsets that overflow.
        assert!(!well_formed(&image(256, u64::MAX - 10, 3)));
        // Not ELF, 32-bit, big-endian, too short.
        let mut v = image(256, 64, 1);
        v[0] = b'X';
        assert!(!well_formed(&v));
        let mut v = image(256, 64, 1);
        v[4] = 1;
        assert!(!well_formed(&v));
        let mut v = image(256, 64, 1);
        v[5] = 2;
        assert!(!well_formed(&v));
        assert!(!well_formed(b"\x7fELF"));
    }

    #[test]
    fn the_folder_comes_from_the_path_then_xdg_then_home() {
        let c = |v| KernelCache::from_vars(vars(v)).map(|c| c.dir);
        assert_eq!(
            c(&[
                ("STRATA_KERNEL_CACHE_PATH", "/x/k"),
                ("XDG_CACHE_HOME", "/c"),
                ("HOME", "/h")
            ]),
            Some(PathBuf::from("/x/k"))
        );
        assert_eq!(
            c(&[("XDG_CACHE_HOME", "/c"), ("HOME", "/h")]),
            Some(PathBuf::from("/c/strata/kernels"))
        );
        assert_eq!(
            c(&[("XDG_CACHE_HOME", ""), ("HOME", "/h")]),
            Some(PathBuf::from("/h/.cache/strata/kernels"))
        );
        assert_eq!(c(&[]), None);
    }

    #[test]
    fn the_cache_can_be_turned_off() {
        for off in ["0", "false", "OFF", "no"] {
            let v = vars(&[("STRATA_KERNEL_CACHE", off), ("HOME", "/h")]);
            assert_eq!(KernelCache::from_vars(v), None, "{off}");
        }
        let v = vars(&[("STRATA_KERNEL_CACHE", "1"), ("HOME", "/h")]);
        assert!(KernelCache::from_vars(v).is_some());
    }

    #[test]
    fn every_part_that_decides_the_cubin_changes_the_entry() {
        let c = KernelCache::at("/k");
        let base = c.entry("softmax_f32", &[b"src", b"sm_90", b"-O3", b"13.0"]);
        for other in [
            c.entry("softmax_f32", &[b"src2", b"sm_90", b"-O3", b"13.0"]),
            c.entry("softmax_f32", &[b"src", b"sm_80", b"-O3", b"13.0"]),
            c.entry("softmax_f32", &[b"src", b"sm_90", b"-O2", b"13.0"]),
            c.entry("softmax_f32", &[b"src", b"sm_90", b"-O3", b"13.1"]),
            // The same bytes split differently between parts.
            c.entry("softmax_f32", &[b"srcs", b"m_90", b"-O3", b"13.0"]),
        ] {
            assert_ne!(base, other);
        }
        assert_eq!(
            base,
            c.entry("softmax_f32", &[b"src", b"sm_90", b"-O3", b"13.0"])
        );
        let name = base.file_name().unwrap().to_str().unwrap();
        assert!(
            name.starts_with("softmax_f32-") && name.ends_with(".cubin"),
            "{name}"
        );
        // Names with path separators stay inside the folder.
        let odd = c.entry("../a/b c", &[b"x"]);
        assert_eq!(odd.parent(), Some(Path::new("/k")));
    }

    #[test]
    fn an_entry_survives_a_round_trip_and_a_damaged_one_is_dropped() {
        let dir = scratch("roundtrip");
        let c = KernelCache::at(&dir);
        let p = c.entry("k", &[b"src"]);
        assert_eq!(c.load(&p), None);
        let cubin = image(512, 128, 4);
        c.store(&p, &cubin);
        assert_eq!(c.load(&p), Some(cubin));
        std::fs::write(&p, b"not an image").unwrap();
        assert_eq!(c.load(&p), None);
        assert!(!p.exists(), "a damaged entry is removed");
        // No temporary file is left behind.
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn writers_racing_on_one_entry_leave_a_whole_image() {
        let dir = scratch("race");
        let c = KernelCache::at(&dir);
        let p = c.entry("k", &[b"src"]);
        // Past its 64-byte header, the image's bytes are all different.
        let mut img = image(200_000, 1000, 100);
        for (i, x) in img.iter_mut().enumerate().skip(64) {
            *x = i as u8;
        }
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| c.store(&p, &img));
            }
        });
        assert_eq!(c.load(&p).as_deref(), Some(&img[..]));
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_folder_that_cannot_be_made_is_no_error() {
        let dir = scratch("blocked");
        std::fs::write(&dir, b"a file where the folder should be").unwrap();
        let c = KernelCache::at(dir.join("kernels"));
        let p = c.entry("k", &[b"src"]);
        c.store(&p, &image(256, 64, 1));
        assert_eq!(c.load(&p), None);
        std::fs::remove_file(&dir).unwrap();
    }
}
