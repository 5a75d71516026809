//! Finding the CUDA run-time libraries (NVRTC, cuBLAS), compiling kernel
//! source to a CUBIN for the device's own architecture, and loading it.
//!
//! # Finding the libraries
//!
//! cudarc dlopens bare names (`libnvrtc.so.13`, ...) through the loader path.
//! The CUDA 13 pip wheels keep their libraries in
//! `site-packages/nvidia/cu13/lib`, off that path, and the pip NVRTC has no
//! RUNPATH, so it cannot find its own `libnvrtc-builtins` either. Before the
//! first use this module searches, in order: every `LD_LIBRARY_PATH` entry,
//! `$CUDA_HOME`/`$CUDA_PATH`, `/usr/local/cuda`, and the `nvidia/cu13/lib`
//! (and CUDA 12's `nvidia/cuda_nvrtc/lib`, `nvidia/cublas/lib`, and NCCL's
//! `nvidia/nccl/lib` and cuDNN's `nvidia/cudnn/lib`, searched by `nccl.rs`
//! and `cudnn.rs`) folders of the
//! Python environments under `$VIRTUAL_ENV`, `$CONDA_PREFIX`, `/opt/torch/.venv`,
//! `/opt/conda`, `/opt/venv`, `/usr/local`, `/usr` and `~/.local`. Where a folder holds the
//! library, its companions (`libnvrtc-builtins`, `libcublasLt`) are loaded
//! from the same folder first, then the library itself by full path; glibc
//! then satisfies cudarc's later dlopen by the library's SONAME. When no folder
//! holds it, the plain loader path is tried; when that fails too the error
//! names every folder searched.
//!
//! # Compiling
//!
//! Kernels are compiled with `--gpu-architecture=sm_XY` for the device's
//! compute capability and the CUBIN (not PTX, which a driver older than the
//! NVRTC may refuse) is loaded with `cuModuleLoadData`. CUBINs are cached for
//! the process by (source, architecture), modules by (source, device), and
//! CUBINs on disk between processes (`kernel_cache.rs`).

use super::context::{cu, failure, guarded, CudaDevice};
use super::kernel_cache::KernelCache;
use crate::error::{Result, TensorError};
use cudarc::driver::sys;
use cudarc::nvrtc::sys as nvrtc_sys;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// Handles of libraries loaded by full path; kept for the life of the process.
static KEPT: Mutex<Vec<libloading::Library>> = Mutex::new(Vec::new());

/// Folders that may hold the CUDA run-time libraries, in search order.
pub fn search_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Ok(p) = std::env::var("LD_LIBRARY_PATH") {
        dirs.extend(p.split(':').filter(|s| !s.is_empty()).map(PathBuf::from));
    }
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Ok(p) = std::env::var(var) {
            dirs.push(Path::new(&p).join("lib64"));
            dirs.push(Path::new(&p).join("lib"));
        }
    }
    dirs.push("/usr/local/cuda/lib64".into());
    dirs.push("/usr/local/cuda/targets/x86_64-linux/lib".into());
    let mut prefixes: Vec<PathBuf> = Vec::new();
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Ok(p) = std::env::var(var) {
            prefixes.push(p.into());
        }
    }
    for p in [
        "/opt/torch/.venv",
        "/opt/conda",
        "/opt/venv",
        "/usr/local",
        "/usr",
    ] {
        prefixes.push(p.into());
    }
    if let Ok(h) = std::env::var("HOME") {
        prefixes.push(Path::new(&h).join(".local"));
    }
    for prefix in prefixes {
        for lib in ["lib", "lib64"] {
            let Ok(entries) = std::fs::read_dir(prefix.join(lib)) else {
                continue;
            };
            let mut pythons: Vec<PathBuf> = entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("python3"))
                })
                .collect();
            pythons.sort();
            for py in pythons.into_iter().rev() {
                for site in ["site-packages", "dist-packages"] {
                    let nv = py.join(site).join("nvidia");
                    for sub in [
                        "cu13/lib",
                        "cuda_nvrtc/lib",
                        "cublas/lib",
                        "nccl/lib",
                        "cudnn/lib",
                        "cusolver/lib",
                        "cusparse/lib",
                        "nvjitlink/lib",
                    ] {
                        dirs.push(nv.join(sub));
                    }
                }
            }
        }
    }
    dirs.retain(|d| d.is_dir());
    dirs.dedup();
    dirs
}

/// Files in `dir` whose names start with `prefix`, newest version last.
fn files_with_prefix(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with(prefix))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Loads `path` and keeps it loaded.
fn keep(path: &Path) -> std::result::Result<(), String> {
    // SAFETY: loading a CUDA library runs its initialisers, which have no
    // preconditions; the handle is kept for the life of the process so no
    // symbol resolved from it can dangle.
    match unsafe { libloading::Library::new(path) } {
        Ok(l) => {
            KEPT.lock().push(l);
            Ok(())
        }
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// Makes `lib` (e.g. `libnvrtc.so`) loadable by its SONAME, loading
/// `companions` from the same folder first. `present` asks cudarc whether the
/// library now loads by bare name.
fn preload(
    what: &str,
    stems: &[&str],
    companions: &[&str],
    present: fn() -> bool,
) -> std::result::Result<(), String> {
    let dirs = search_dirs();
    let mut tried = Vec::new();
    for dir in &dirs {
        for stem in stems {
            let cand = dir.join(stem);
            if !cand.exists() {
                continue;
            }
            for c in companions {
                for f in files_with_prefix(dir, c) {
                    let _ = keep(&f);
                }
            }
            match keep(&cand) {
                Ok(()) if present() => return Ok(()),
                Ok(()) => tried.push(format!(
                    "{} (loaded, but not by its SONAME)",
                    cand.display()
                )),
                Err(e) => tried.push(e),
            }
        }
    }
    if present() {
        return Ok(());
    }
    Err(format!(
        "{what} was not found: searched the loader path for {stems:?} and the folders [{}]{}; \
         install the CUDA toolkit or `pip install nvidia-cuda-nvrtc nvidia-cublas` (CUDA 13), \
         or add the folder holding the library to LD_LIBRARY_PATH",
        dirs.iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        if tried.is_empty() {
            String::new()
        } else {
            format!(" (tried: {})", tried.join("; "))
        }
    ))
}

fn nvrtc_present() -> bool {
    // SAFETY: only tries to dlopen candidate names; never panics.
    unsafe { nvrtc_sys::is_culib_present() }
}

fn cublas_present() -> bool {
    // SAFETY: only tries to dlopen candidate names; never panics.
    unsafe { cudarc::cublas::sys::is_culib_present() }
}

/// Makes NVRTC loadable (once per process); why not, otherwise.
pub(crate) fn ensure_nvrtc() -> std::result::Result<(), String> {
    static R: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    R.get_or_init(|| {
        preload(
            "NVRTC (libnvrtc.so.13)",
            &["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"],
            &["libnvrtc-builtins.so"],
            nvrtc_present,
        )
    })
    .clone()
}

/// Makes cuBLAS loadable (once per process); why not, otherwise.
pub(crate) fn ensure_cublas() -> std::result::Result<(), String> {
    static R: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    R.get_or_init(|| {
        preload(
            "cuBLAS (libcublas.so.13)",
            &["libcublas.so.13", "libcublas.so.12", "libcublas.so"],
            &["libcublasLt.so"],
            cublas_present,
        )
    })
    .clone()
}

/// CUBINs by (kernel key, architecture).
type CubinCache = Mutex<HashMap<(Arc<str>, String), Arc<Vec<u8>>>>;

fn cubin_cache() -> &'static CubinCache {
    static C: OnceLock<CubinCache> = OnceLock::new();
    C.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The on-disk kernel cache the environment asks for (read once).
fn disk_cache() -> Option<&'static KernelCache> {
    static C: OnceLock<Option<KernelCache>> = OnceLock::new();
    C.get_or_init(KernelCache::from_env).as_ref()
}

/// NVRTC's version, `major.minor` (part of a disk cache entry's key).
fn nvrtc_version() -> String {
    static V: OnceLock<String> = OnceLock::new();
    V.get_or_init(|| {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: NVRTC is loaded (`ensure_nvrtc` succeeded before any
        // compile); both are valid out-pointers.
        let r = unsafe { nvrtc_sys::nvrtcVersion(&mut major, &mut minor) };
        if r == nvrtc_sys::nvrtcResult::NVRTC_SUCCESS {
            format!("{major}.{minor}")
        } else {
            "unknown".to_string()
        }
    })
    .clone()
}

/// A CUBIN, and whether it was read from the disk cache.
struct Compiled {
    cubin: Arc<Vec<u8>>,
    from_disk: bool,
}

/// Compiles `src` for `arch` (`sm_90`) to a CUBIN with NVRTC, unless the
/// process or the disk cache has it already.
fn compile(dev: &CudaDevice, name: &str, src: &str, arch: &str) -> Result<Compiled> {
    let key: (Arc<str>, String) = (Arc::from(name), arch.to_string());
    if let Some(c) = cubin_cache().lock().get(&key) {
        return Ok(Compiled {
            cubin: Arc::clone(c),
            from_disk: false,
        });
    }
    let device = dev.device();
    ensure_nvrtc().map_err(|reason| TensorError::BackendUnavailable { device, reason })?;
    let opts = options(arch);
    let on_disk = disk_entry(name, src, arch, &opts);
    if let Some((c, path)) = &on_disk {
        if let Some(bytes) = c.load(path) {
            let cubin = Arc::new(bytes);
            cubin_cache().lock().insert(key, Arc::clone(&cubin));
            return Ok(Compiled {
                cubin,
                from_disk: true,
            });
        }
    }
    let op = format!("NVRTC compile of {name}");
    let cubin = guarded(device, &op, || {
        let csrc = CString::new(src).map_err(|e| failure(device, &op, e.to_string()))?;
        let cname =
            CString::new(format!("{name}.cu")).map_err(|e| failure(device, &op, e.to_string()))?;
        let prog = cudarc::nvrtc::result::create_program(&csrc, Some(&cname))
            .map_err(|e| failure(device, &op, format!("{e:?}")))?;
        // SAFETY: `prog` was created above and is destroyed below, once.
        let compiled = unsafe { cudarc::nvrtc::result::compile_program(prog, &opts) };
        let out = match compiled {
            Ok(()) => {
                let mut size: usize = 0;
                // SAFETY: `prog` compiled successfully; `size` is a valid out-pointer.
                let r = unsafe { nvrtc_sys::nvrtcGetCUBINSize(prog, &mut size) };
                if r != nvrtc_sys::nvrtcResult::NVRTC_SUCCESS {
                    Err(failure(device, &op, format!("nvrtcGetCUBINSize: {r:?}")))
                } else {
                    let mut buf = vec![0u8; size];
                    // SAFETY: `buf` holds exactly the `size` bytes NVRTC reported.
                    let r = unsafe { nvrtc_sys::nvrtcGetCUBIN(prog, buf.as_mut_ptr().cast()) };
                    if r != nvrtc_sys::nvrtcResult::NVRTC_SUCCESS {
                        Err(failure(device, &op, format!("nvrtcGetCUBIN: {r:?}")))
                    } else {
                        Ok(buf)
                    }
                }
            }
            Err(e) => {
                // SAFETY: `prog` is live; the log is read before it is destroyed.
                let log = unsafe { cudarc::nvrtc::result::get_program_log(prog) }
                    .map(|l| {
                        let bytes: Vec<u8> =
                            l.iter().map(|&c| c as u8).take_while(|&c| c != 0).collect();
                        String::from_utf8_lossy(&bytes).into_owned()
                    })
                    .unwrap_or_default();
                Err(failure(
                    device,
                    &op,
                    format!("{e:?} with options {opts:?}:\n{log}\n--- source ---\n{src}"),
                ))
            }
        };
        // SAFETY: `prog` is live and destroyed exactly once here.
        let _ = unsafe { cudarc::nvrtc::result::destroy_program(prog) };
        out
    })?;
    if let Some((c, path)) = &on_disk {
        c.store(path, &cubin);
    }
    let cubin = Arc::new(cubin);
    cubin_cache().lock().insert(key, Arc::clone(&cubin));
    Ok(Compiled {
        cubin,
        from_disk: false,
    })
}

/// Forgets the CUBIN of `name` for `arch`, in the process and on disk (the
/// driver refused the one read from disk).
fn forget(name: &str, src: &str, arch: &str) {
    cubin_cache()
        .lock()
        .remove(&(Arc::from(name), arch.to_string()));
    if let Some((c, path)) = disk_entry(name, src, arch, &options(arch)) {
        c.remove(&path);
    }
}

/// NVRTC's options for `arch`.
fn options(arch: &str) -> Vec<String> {
    vec![
        format!("--gpu-architecture={arch}"),
        "--std=c++17".to_string(),
        "--fmad=false".to_string(),
    ]
}

/// The disk cache's entry for kernel `name` compiled from `src` for `arch`
/// with `opts` (by this NVRTC), when there is a disk cache.
fn disk_entry(
    name: &str,
    src: &str,
    arch: &str,
    opts: &[String],
) -> Option<(&'static KernelCache, PathBuf)> {
    let c = disk_cache()?;
    let (joined, version) = (opts.join(" "), nvrtc_version());
    let parts: [&[u8]; 4] = [
        src.as_bytes(),
        arch.as_bytes(),
        joined.as_bytes(),
        version.as_bytes(),
    ];
    Some((c, c.entry(name, &parts)))
}

/// The architecture name of a device (`sm_90`).
pub(crate) fn arch(dev: &CudaDevice) -> String {
    format!("sm_{}{}", dev.cc.0, dev.cc.1)
}

/// Compiles (once per process) and loads (once per device) the source that
/// `src` generates for the unique kernel key `name`, returning its kernels
/// `names` in order.
pub(crate) fn functions(
    dev: &CudaDevice,
    name: &str,
    src: impl FnOnce() -> String,
    names: &[&str],
) -> Result<Arc<[super::context::Function]>> {
    if let Some(v) = dev.functions.lock().get(name) {
        return Ok(Arc::clone(v));
    }
    let src = src();
    let arch = arch(dev);
    let compiled = compile(dev, name, &src, &arch)?;
    dev.bind()?;
    let found = match load_functions(dev, &compiled.cubin, names) {
        // A CUBIN from the disk cache that the driver refuses (damaged, or
        // written by something else): drop it and compile afresh.
        Err(_) if compiled.from_disk => {
            forget(name, &src, &arch);
            let fresh = compile(dev, name, &src, &arch)?;
            load_functions(dev, &fresh.cubin, names)?
        }
        r => r?,
    };
    let found: Arc<[super::context::Function]> = found.into();
    dev.functions
        .lock()
        .insert(name.to_string(), Arc::clone(&found));
    Ok(found)
}

/// Loads `cubin` as a module on `dev` (whose context is current) and finds
/// its kernels `names`.
fn load_functions(
    dev: &CudaDevice,
    cubin: &[u8],
    names: &[&str],
) -> Result<Vec<super::context::Function>> {
    let device = dev.device();
    guarded(device, "cuModuleLoadData", || {
        let mut module: sys::CUmodule = std::ptr::null_mut();
        // SAFETY: `cubin` is a CUBIN image NVRTC produced for this device's
        // architecture, in this process or in an earlier one (the disk cache
        // hands out only 64-bit ELF images whose headers lie within the bytes
        // read, so the driver never reads past them; it rejects an image it
        // cannot use with an error). The context is current. The module is
        // never unloaded, so its functions stay valid.
        cu(device, "cuModuleLoadData", unsafe {
            sys::cuModuleLoadData(&mut module, cubin.as_ptr().cast())
        })?;
        names
            .iter()
            .map(|n| {
                let cn = CString::new(*n)
                    .map_err(|e| failure(device, "cuModuleGetFunction", e.to_string()))?;
                let mut f: sys::CUfunction = std::ptr::null_mut();
                // SAFETY: `module` was loaded above; `cn` is a NUL-terminated name.
                cu(device, "cuModuleGetFunction", unsafe {
                    sys::cuModuleGetFunction(&mut f, module, cn.as_ptr())
                })?;
                Ok(super::context::Function(f))
            })
            .collect::<Result<Vec<_>>>()
    })
}
