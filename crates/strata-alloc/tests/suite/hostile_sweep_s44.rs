//! Session 44's sweep of hostile inputs to strata-alloc's public API (after
//! `hostile_sweep_s43.rs`): the environment variables.
//!
//! Defect these tests found (fixed with them):
//!
//! * `STRATA_ALLOC_CONF` and `STRATA_NO_MEMORY_CACHING` were read with
//!   `std::env::var`, whose error for a value that is not UTF-8 was taken
//!   for "unset": `AllocatorConfig::from_env` returned the defaults and the
//!   registry's allocators cached, silently dropping the user's setting
//!   (PyTorch reads `PYTORCH_CUDA_ALLOC_CONF`'s bytes and refuses a key it
//!   does not know; `PYTORCH_NO_CUDA_MEMORY_CACHING` takes only `0` and
//!   `1`). Such a value is now a typed `ConfigError` naming the variable,
//!   as any other malformed value is.

#[cfg(unix)]
use std::ffi::OsStr;
#[cfg(unix)]
use std::os::unix::ffi::OsStrExt;

/// The name of `name`, a test of this module, in this test binary.
#[cfg(unix)]
fn test_path(name: &str) -> String {
    let path = module_path!();
    match path.split_once("::") {
        Some((_, m)) => format!("{m}::{name}"),
        None => name.to_string(),
    }
}

/// Runs the ignored test `child` of this module in a process of its own with
/// the environment variables `vars`, and asserts that it passed.
#[cfg(unix)]
fn run_child(child: &str, vars: &[(&str, &OsStr)]) {
    let exe = std::env::current_exe().unwrap();
    let name = test_path(child);
    let mut cmd = std::process::Command::new(exe);
    cmd.args(["--exact", name.as_str(), "--ignored", "--test-threads=1"]);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{child} with {vars:?}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The child half of `a_setting_that_is_not_utf8_is_refused`: run with the
/// parent's variables (it checks nothing without `STRATA_S44_EXPECT`).
#[test]
#[ignore = "run in a child process by a_setting_that_is_not_utf8_is_refused"]
fn child_reads_the_environment() {
    let Ok(expect) = std::env::var("STRATA_S44_EXPECT") else {
        return;
    };
    match expect.as_str() {
        "conf-error" => {
            let e = strata_alloc::AllocatorConfig::from_env().unwrap_err();
            let text = e.to_string();
            assert!(text.contains("STRATA_ALLOC_CONF"), "{text}");
            assert!(text.contains("UTF-8"), "{text}");
            // And the registry's allocator, made from it, is refused.
            let Err(e) = strata_alloc::allocator(strata_alloc::Device::Cpu) else {
                panic!("an allocator made from a refused STRATA_ALLOC_CONF")
            };
            assert!(e.to_string().contains("STRATA_ALLOC_CONF"), "{e}");
        }
        "caching-error" => {
            let Err(e) = strata_alloc::allocator(strata_alloc::Device::Cpu) else {
                panic!("an allocator made despite a refused STRATA_NO_MEMORY_CACHING")
            };
            let text = e.to_string();
            assert!(text.contains("STRATA_NO_MEMORY_CACHING"), "{text}");
        }
        "conf-ok" => {
            let c = strata_alloc::AllocatorConfig::from_env().unwrap();
            assert_eq!(c.max_split_size, Some(64 << 20));
        }
        other => panic!("unknown expectation {other}"),
    }
}

#[cfg(unix)]
#[test]
fn a_setting_that_is_not_utf8_is_refused() {
    let bad = OsStr::from_bytes(b"max_split_size_mb:64,\xff\xfe:1");
    run_child(
        "child_reads_the_environment",
        &[
            ("STRATA_ALLOC_CONF", bad),
            ("STRATA_S44_EXPECT", OsStr::new("conf-error")),
        ],
    );
    run_child(
        "child_reads_the_environment",
        &[
            ("STRATA_NO_MEMORY_CACHING", OsStr::from_bytes(b"1\xff")),
            ("STRATA_S44_EXPECT", OsStr::new("caching-error")),
        ],
    );
    // The same string in UTF-8 is read as before.
    run_child(
        "child_reads_the_environment",
        &[
            ("STRATA_ALLOC_CONF", OsStr::new("max_split_size_mb:64")),
            ("STRATA_S44_EXPECT", OsStr::new("conf-ok")),
        ],
    );
}
