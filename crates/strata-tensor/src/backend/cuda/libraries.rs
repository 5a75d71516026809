//! Finding an optional CUDA library that strata loads itself (NCCL,
//! cuDNN) and resolving its entry points: the candidate files, in search
//! order, are the file or folder an environment variable names, the
//! library's names in the folders [`search_dirs`] lists (`LD_LIBRARY_PATH`,
//! the CUDA toolkit, the `nvidia/*/lib` folders of Python environments),
//! then the bare names on the loader path.

use super::nvrtc::search_dirs;
use std::path::{Path, PathBuf};

/// Candidate files for a library called `names` (preferred first) whose
/// location `var` may give, in search order, and a description of where was
/// searched (for the error when none loads).
pub(crate) fn candidates(var: &str, names: &[&str]) -> (Vec<PathBuf>, String) {
    let mut out = Vec::new();
    let mut searched = Vec::new();
    if let Some(p) = std::env::var_os(var) {
        let p = PathBuf::from(p);
        searched.push(format!("{var}={}", p.display()));
        if p.is_dir() {
            out.extend(names.iter().map(|n| p.join(n)).filter(|c| c.exists()));
        } else {
            out.push(p);
        }
    }
    let dirs = search_dirs();
    searched.push(format!(
        "the folders [{}]",
        dirs.iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ));
    for d in &dirs {
        out.extend(names.iter().map(|n| d.join(n)).filter(|c| c.exists()));
    }
    searched.push("the loader path".into());
    out.extend(names.iter().map(PathBuf::from));
    (out, searched.join(", "))
}

/// Resolves `name` from `lib` (loaded from `path`) as a function of type `T`.
///
/// # Safety
/// `T` must be the C signature of `name` in the library's headers.
pub(crate) unsafe fn symbol<T: Copy>(
    lib: &libloading::Library,
    path: &Path,
    name: &str,
) -> std::result::Result<T, String> {
    // SAFETY: the caller guarantees `T` is the symbol's type.
    unsafe { lib.get::<T>(name.as_bytes()) }
        .map(|s| *s)
        .map_err(|e| format!("{}: no entry point {name}: {e}", path.display()))
}
