//! Dense factorizations through cuSOLVER (`cusolverDn`), the GPU kernels of
//! `strata_tensor::linalg` (session 80): `getrf`/`getrs` (LU and its
//! solves), `potrf` (Cholesky), `geqrf`/`orgqr` (Householder QR),
//! `syevd` (symmetric eigendecomposition) and `gesvd` (SVD), f32 (`S`) and
//! f64 (`D`), one call per matrix of a batch on strata's current stream.
//! What is computed from them, and the errors, are `ops/linalg/gpu.rs`'s;
//! this module loads the library and runs the calls on buffers it is
//! handed.
//!
//! # Finding the library
//!
//! cuSOLVER is optional. It is searched for once per process, as cuDNN is
//! (`cudnn.rs`): `$STRATA_CUSOLVER_LIBRARY` (the library file, or a folder
//! holding it), then `libcusolver.so.12` / `libcusolver.so.11` /
//! `libcusolver.so` in the folders `nvrtc::search_dirs` lists
//! (`LD_LIBRARY_PATH`, the CUDA toolkit, PyTorch's `nvidia/cu13/lib` and
//! `nvidia/cusolver/lib` wheel folders), then the loader path. Its own
//! dependencies (cuBLAS and cuBLASLt, cuSPARSE, nvJitLink) are loaded first
//! by full path where they are found beside it or in those folders, so that
//! its loading by name finds them. Where none loads, [`Session::open`]
//! answers `None` and `linalg` factors on the host (`faer`), as before;
//! [`version`] says why.
//!
//! # Column-major storage
//!
//! cuSOLVER's matrices are column-major; strata's are row-major. A
//! row-major `r x c` buffer read column-major is the `c x r` transpose, so
//! the callers (`ops/linalg/gpu.rs`) hand over buffers already laid out for
//! the factorization they need: a fresh copy of `Aᵀ` (`a.mT()` made
//! row-major, which is `A` column-major) where the factors of `A` itself
//! matter (LU, whose pivots and zero-pivot index must be `A`'s; QR), and a
//! fresh row-major copy of `A` (`Aᵀ` column-major) where the transpose is
//! as good (a symmetric matrix read from the other triangle: Cholesky and
//! `eigh` flip `uplo`; the SVD of a wide matrix, `gesvd` needing `m >= n`).
//! Every buffer handed here is a private, contiguous copy: the calls write
//! into it.
//!
//! Sizes are C `int`s: a dim above `i32::MAX` is not handed here (the
//! callers go to the host path), and a workspace size is checked before
//! use. Status codes are read as plain integers.

use super::context::{cu_stream, failure, CudaDevice};
use super::libraries::{candidates, symbol};
use super::nvrtc::search_dirs;
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::tensor::Tensor;
use parking_lot::{Mutex, MutexGuard};
use std::ffi::{c_int, c_schar, c_void};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use strata_alloc::{Allocation, Device};

/// The environment variable naming the cuSOLVER library (a file or a folder).
pub(crate) const LIBRARY_VAR: &str = "STRATA_CUSOLVER_LIBRARY";

/// `cusolverStatus_t` as returned (0 is success).
type Status = c_int;
/// A `cusolverDnHandle_t`.
type Opaque = *mut c_void;
/// A device pointer to f32 or f64 elements (the `S` and `D` routines take
/// `float*` / `double*`, passed alike).
type Ptr = *mut c_void;

// cublasFillMode_t
const FILL_LOWER: c_int = 0;
const FILL_UPPER: c_int = 1;
// cublasOperation_t
const OP_N: c_int = 0;
const OP_T: c_int = 1;
// cusolverEigMode_t
const EIG_NOVECTOR: c_int = 0;
const EIG_VECTOR: c_int = 1;

type GetVersionFn = unsafe extern "C" fn(*mut c_int) -> Status;
type CreateFn = unsafe extern "C" fn(*mut Opaque) -> Status;
type SetStreamFn = unsafe extern "C" fn(Opaque, *mut c_void) -> Status;
/// `cusolverDn?getrf_bufferSize(handle, m, n, A, lda, *lwork)`, also
/// `?potrf_bufferSize(handle, uplo, n, A, lda, *lwork)` and
/// `?geqrf_bufferSize(handle, m, n, A, lda, *lwork)` (all int arguments).
type Buf3Fn = unsafe extern "C" fn(Opaque, c_int, c_int, Ptr, c_int, *mut c_int) -> Status;
/// `cusolverDn?getrf(handle, m, n, A, lda, work, ipiv, info)`.
type GetrfFn =
    unsafe extern "C" fn(Opaque, c_int, c_int, Ptr, c_int, Ptr, *mut c_int, *mut c_int) -> Status;
/// `cusolverDn?getrs(handle, trans, n, nrhs, A, lda, ipiv, B, ldb, info)`.
type GetrsFn = unsafe extern "C" fn(
    Opaque,
    c_int,
    c_int,
    c_int,
    *const c_void,
    c_int,
    *const c_int,
    Ptr,
    c_int,
    *mut c_int,
) -> Status;
/// `cusolverDn?potrf(handle, uplo, n, A, lda, work, lwork, info)`.
type PotrfFn =
    unsafe extern "C" fn(Opaque, c_int, c_int, Ptr, c_int, Ptr, c_int, *mut c_int) -> Status;
/// `cusolverDn?geqrf(handle, m, n, A, lda, tau, work, lwork, info)`.
type GeqrfFn =
    unsafe extern "C" fn(Opaque, c_int, c_int, Ptr, c_int, Ptr, Ptr, c_int, *mut c_int) -> Status;
/// `cusolverDn?orgqr_bufferSize(handle, m, n, k, A, lda, tau, *lwork)`.
type OrgqrBufFn = unsafe extern "C" fn(
    Opaque,
    c_int,
    c_int,
    c_int,
    *const c_void,
    c_int,
    *const c_void,
    *mut c_int,
) -> Status;
/// `cusolverDn?orgqr(handle, m, n, k, A, lda, tau, work, lwork, info)`.
type OrgqrFn = unsafe extern "C" fn(
    Opaque,
    c_int,
    c_int,
    c_int,
    Ptr,
    c_int,
    *const c_void,
    Ptr,
    c_int,
    *mut c_int,
) -> Status;
/// `cusolverDn?syevd_bufferSize(handle, jobz, uplo, n, A, lda, W, *lwork)`.
type SyevdBufFn = unsafe extern "C" fn(
    Opaque,
    c_int,
    c_int,
    c_int,
    *const c_void,
    c_int,
    *const c_void,
    *mut c_int,
) -> Status;
/// `cusolverDn?syevd(handle, jobz, uplo, n, A, lda, W, work, lwork, info)`.
type SyevdFn = unsafe extern "C" fn(
    Opaque,
    c_int,
    c_int,
    c_int,
    Ptr,
    c_int,
    Ptr,
    Ptr,
    c_int,
    *mut c_int,
) -> Status;
/// `cusolverDn?gesvd_bufferSize(handle, m, n, *lwork)`.
type GesvdBufFn = unsafe extern "C" fn(Opaque, c_int, c_int, *mut c_int) -> Status;
/// `cusolverDn?gesvd(handle, jobu, jobvt, m, n, A, lda, S, U, ldu, VT,
/// ldvt, work, lwork, rwork, info)`.
type GesvdFn = unsafe extern "C" fn(
    Opaque,
    c_schar,
    c_schar,
    c_int,
    c_int,
    Ptr,
    c_int,
    Ptr,
    Ptr,
    c_int,
    Ptr,
    c_int,
    Ptr,
    c_int,
    Ptr,
    *mut c_int,
) -> Status;

/// One routine's `S` (f32, index 0) and `D` (f64, index 1) entry points.
type Pair<F> = [(F, &'static str); 2];

/// The loaded library and the entry points strata calls.
struct Cusolver {
    /// Kept loaded for the life of the process (the pointers below point
    /// into the last one; the others are its dependencies).
    _libs: Vec<libloading::Library>,
    path: String,
    version: c_int,
    create: CreateFn,
    set_stream: SetStreamFn,
    getrf_buf: Pair<Buf3Fn>,
    getrf: Pair<GetrfFn>,
    getrs: Pair<GetrsFn>,
    potrf_buf: Pair<Buf3Fn>,
    potrf: Pair<PotrfFn>,
    geqrf_buf: Pair<Buf3Fn>,
    geqrf: Pair<GeqrfFn>,
    orgqr_buf: Pair<OrgqrBufFn>,
    orgqr: Pair<OrgqrFn>,
    syevd_buf: Pair<SyevdBufFn>,
    syevd: Pair<SyevdFn>,
    gesvd_buf: Pair<GesvdBufFn>,
    gesvd: Pair<GesvdFn>,
}

/// The files named `prefix*` in `dir`, sorted.
fn files_with_prefix(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with(prefix) && n.contains(".so"))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// cuSOLVER's dependencies that are not on the loader path by default
/// (nvJitLink, then cuSPARSE, which needs it), loaded by full path from
/// `path`'s folder, else from the search folders; whatever does not load is
/// left to the loader.
fn dependencies(path: &Path) -> Vec<libloading::Library> {
    let mut dirs: Vec<PathBuf> = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| vec![d.to_path_buf()])
        .unwrap_or_default();
    dirs.extend(search_dirs());
    let mut kept = Vec::new();
    for prefix in ["libnvJitLink.so", "libcusparse.so"] {
        'found: for d in &dirs {
            for f in files_with_prefix(d, prefix).into_iter().rev() {
                // SAFETY: loading a CUDA library runs its initialisers, which
                // have no preconditions; the handle is kept with cuSOLVER's.
                if let Ok(l) = unsafe { libloading::Library::new(&f) } {
                    kept.push(l);
                    break 'found;
                }
            }
        }
    }
    kept
}

fn load(path: &Path) -> std::result::Result<Cusolver, String> {
    let mut libs = dependencies(path);
    // SAFETY: loading cuSOLVER runs its initialisers, which have no
    // preconditions; the handle is stored in a process-wide `OnceLock` and
    // never dropped.
    let lib = unsafe { libloading::Library::new(path) }
        .map_err(|e| format!("{}: {e}", path.display()))?;
    // SAFETY (each `symbol` call): the types above are the C signatures of
    // `cusolverDn.h` (CUDA 11 to 13) with `float*`/`double*` passed as
    // `void*`, enums and status codes as `int`, handles as opaque pointers.
    let c = unsafe {
        macro_rules! pair {
            ($s:literal, $d:literal) => {
                [(symbol(&lib, path, $s)?, $s), (symbol(&lib, path, $d)?, $d)]
            };
        }
        let get_version: GetVersionFn = symbol(&lib, path, "cusolverGetVersion")?;
        let mut version: c_int = 0;
        if get_version(&mut version) != 0 {
            return Err(format!("{}: cusolverGetVersion failed", path.display()));
        }
        Cusolver {
            _libs: Vec::new(),
            path: path.display().to_string(),
            version,
            create: symbol(&lib, path, "cusolverDnCreate")?,
            set_stream: symbol(&lib, path, "cusolverDnSetStream")?,
            getrf_buf: pair!("cusolverDnSgetrf_bufferSize", "cusolverDnDgetrf_bufferSize"),
            getrf: pair!("cusolverDnSgetrf", "cusolverDnDgetrf"),
            getrs: pair!("cusolverDnSgetrs", "cusolverDnDgetrs"),
            potrf_buf: pair!("cusolverDnSpotrf_bufferSize", "cusolverDnDpotrf_bufferSize"),
            potrf: pair!("cusolverDnSpotrf", "cusolverDnDpotrf"),
            geqrf_buf: pair!("cusolverDnSgeqrf_bufferSize", "cusolverDnDgeqrf_bufferSize"),
            geqrf: pair!("cusolverDnSgeqrf", "cusolverDnDgeqrf"),
            orgqr_buf: pair!("cusolverDnSorgqr_bufferSize", "cusolverDnDorgqr_bufferSize"),
            orgqr: pair!("cusolverDnSorgqr", "cusolverDnDorgqr"),
            syevd_buf: pair!("cusolverDnSsyevd_bufferSize", "cusolverDnDsyevd_bufferSize"),
            syevd: pair!("cusolverDnSsyevd", "cusolverDnDsyevd"),
            gesvd_buf: pair!("cusolverDnSgesvd_bufferSize", "cusolverDnDgesvd_bufferSize"),
            gesvd: pair!("cusolverDnSgesvd", "cusolverDnDgesvd"),
        }
    };
    libs.push(lib);
    Ok(Cusolver { _libs: libs, ..c })
}

/// The library, loaded once per process, or why it could not be.
fn library() -> std::result::Result<&'static Cusolver, String> {
    static LIB: OnceLock<std::result::Result<Cusolver, String>> = OnceLock::new();
    LIB.get_or_init(|| {
        // cuSOLVER links cuBLAS and cuBLASLt by name: make them loadable
        // first where strata can find them (a missing one shows in the
        // error below).
        let _ = super::nvrtc::ensure_cublas();
        let (cands, searched) = candidates(
            LIBRARY_VAR,
            &["libcusolver.so.12", "libcusolver.so.11", "libcusolver.so"],
        );
        let mut tried = Vec::new();
        for c in &cands {
            match load(c) {
                Ok(l) => return Ok(l),
                Err(e) => tried.push(e),
            }
        }
        Err(format!(
            "the cuSOLVER library (libcusolver.so.12) was not found: searched {searched} \
             (tried: {}); install the CUDA toolkit or point {LIBRARY_VAR} at \
             libcusolver.so.12 (PyTorch ships it in site-packages/nvidia/cu13/lib or \
             nvidia/cusolver/lib); GPU factorizations run on the host without it, more slowly",
            tried.join("; ")
        ))
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// cuSOLVER's version (`cusolverGetVersion`: major * 1000 + minor * 100 +
/// patch, e.g. 11702 for 11.7.2) and the file it was loaded from, or why it
/// cannot be loaded. It does not need a GPU.
pub(crate) fn version() -> std::result::Result<(i32, String), String> {
    library().map(|l| (l.version, l.path.clone()))
}

/// Whether cuSOLVER loads (once per process; [`version`] says why not).
pub(crate) fn available() -> bool {
    library().is_ok()
}

/// A `cusolverDnHandle_t`, used under its device's mutex.
struct Handle(Opaque);

// SAFETY: a cuSOLVER handle may be used from any thread as long as calls
// on it are serialised, which the mutex holding it guarantees.
unsafe impl Send for Handle {}

/// GPU ordinals below this get a cuSOLVER handle (as `context.rs`'s table).
const MAX_DEVICES: usize = 64;

/// One handle per device, created on first use and kept for the process.
static HANDLES: [Mutex<Option<Handle>>; MAX_DEVICES] = [const { Mutex::new(None) }; MAX_DEVICES];

/// A cuSOLVER failure: the call and its status (cuSOLVER has no error
/// strings before CUDA 12.x, so the names are strata's).
fn status_error(device: Device, call: &str, s: Status) -> TensorError {
    let name = match s {
        1 => "CUSOLVER_STATUS_NOT_INITIALIZED",
        2 => "CUSOLVER_STATUS_ALLOC_FAILED",
        3 => "CUSOLVER_STATUS_INVALID_VALUE",
        4 => "CUSOLVER_STATUS_ARCH_MISMATCH",
        5 => "CUSOLVER_STATUS_MAPPING_ERROR",
        6 => "CUSOLVER_STATUS_EXECUTION_FAILED",
        7 => "CUSOLVER_STATUS_INTERNAL_ERROR",
        8 => "CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED",
        9 => "CUSOLVER_STATUS_NOT_SUPPORTED",
        _ => "a cuSOLVER error",
    };
    failure(device, call, format!("{name} (cuSOLVER status {s})"))
}

/// `v` as a C int, or an error naming what overflowed (the callers check
/// dims first, so this guards products such as workspace sizes).
fn int(device: Device, what: &str, v: usize) -> Result<c_int> {
    c_int::try_from(v).map_err(|_| {
        failure(
            device,
            "cusolver",
            format!("{what} {v} exceeds cuSOLVER's 32-bit int"),
        )
    })
}

/// Whether every one of `dims` fits cuSOLVER's `int`.
pub(crate) fn fits(dims: &[usize]) -> bool {
    dims.iter().all(|&d| c_int::try_from(d).is_ok())
}

/// A device's handle bound to the current stream, for the calls of one
/// factorization of one dtype (f32 or f64).
pub(crate) struct Session {
    lib: &'static Cusolver,
    dev: &'static CudaDevice,
    guard: MutexGuard<'static, Option<Handle>>,
    /// 0 for f32 (`S`), 1 for f64 (`D`).
    which: usize,
    elem: usize,
}

impl Session {
    /// The session for `dtype` on `device`, or `None` where cuSOLVER cannot
    /// run it (not a GPU, not f32/f64, the library not loaded): the caller
    /// then computes on the host.
    pub(crate) fn open(device: Device, dtype: DType) -> Result<Option<Session>> {
        let Device::Cuda(ordinal) = device else {
            return Ok(None);
        };
        let which = match dtype {
            DType::F32 => 0,
            DType::F64 => 1,
            _ => return Ok(None),
        };
        if ordinal >= MAX_DEVICES {
            return Ok(None);
        }
        let Ok(lib) = library() else {
            return Ok(None);
        };
        let dev = CudaDevice::get(ordinal)?;
        dev.bind()?;
        let mut guard = HANDLES[ordinal].lock();
        if guard.is_none() {
            let mut raw: Opaque = std::ptr::null_mut();
            // SAFETY: `raw` is a valid out-pointer; the device's context is
            // current on this thread (bound above).
            let s = unsafe { (lib.create)(&mut raw) };
            if s != 0 {
                return Err(status_error(device, "cusolverDnCreate", s));
            }
            *guard = Some(Handle(raw));
        }
        let h = guard.as_ref().map_or(std::ptr::null_mut(), |h| h.0);
        // SAFETY: the handle is live and the stream is a live stream of this
        // device (the current one, which strata keeps alive).
        let s = unsafe { (lib.set_stream)(h, cu_stream(dev.stream()) as *mut c_void) };
        if s != 0 {
            return Err(status_error(device, "cusolverDnSetStream", s));
        }
        Ok(Some(Session {
            lib,
            dev,
            guard,
            which,
            elem: dtype.size(),
        }))
    }

    fn h(&self) -> Opaque {
        self.guard.as_ref().map_or(std::ptr::null_mut(), |h| h.0)
    }

    fn device(&self) -> Device {
        self.dev.device()
    }

    /// A workspace of `lwork` elements from the caching allocator, on the
    /// current stream (returned to the cache when dropped, ordered after
    /// the calls queued so far).
    fn workspace(&self, call: &str, lwork: c_int) -> Result<(Option<Allocation>, Ptr)> {
        if lwork < 0 {
            return Err(failure(
                self.device(),
                call,
                format!("cuSOLVER asked for a negative workspace ({lwork})"),
            ));
        }
        let bytes = (lwork as usize).max(1) * self.elem;
        let a = self.dev.scratch(bytes)?;
        let p = a.ptr() as usize as Ptr;
        Ok((Some(a), p))
    }

    fn check(&self, call: &str, s: Status) -> Result<()> {
        if s == 0 {
            Ok(())
        } else {
            Err(status_error(self.device(), call, s))
        }
    }

    /// A fresh i32 tensor of `shape` on the device (pivots, infos).
    fn ints(&self, shape: &[usize]) -> Result<Tensor> {
        Tensor::empty(shape, DType::I32, self.device())
    }

    /// A fresh tensor of the session's dtype.
    fn reals(&self, shape: &[usize]) -> Result<Tensor> {
        let dt = if self.which == 0 {
            DType::F32
        } else {
            DType::F64
        };
        Tensor::empty(shape, dt, self.device())
    }

    /// Checks that `t` is a contiguous tensor of this device holding `count`
    /// matrices of `per` elements of the session's dtype (`ints`: i32), so
    /// that every address [`Session::at`] forms for it is inside it: the
    /// calls below write through those addresses.
    fn operand(&self, call: &str, t: &Tensor, count: usize, per: usize, ints: bool) -> Result<()> {
        let dtype = if ints {
            DType::I32
        } else if self.which == 0 {
            DType::F32
        } else {
            DType::F64
        };
        let need = count.checked_mul(per);
        if t.device() != self.device()
            || t.dtype() != dtype
            || !t.is_contiguous()
            || need.is_none_or(|need| t.numel() < need || need == 0)
        {
            return Err(failure(
                self.device(),
                call,
                format!(
                    "internal: an operand of {:?} {} (contiguous: {}) where {count} matrices of \
                     {per} {dtype} elements were expected",
                    t.shape(),
                    t.dtype(),
                    t.is_contiguous()
                ),
            ));
        }
        Ok(())
    }

    /// The device address of element `k * per` of the contiguous `t`.
    fn at(&self, t: &Tensor, k: usize, per: usize) -> Ptr {
        (t.data_ptr() + (k * per * t.dtype().size()) as u64) as usize as Ptr
    }

    /// LU with partial pivoting of each of the `count` column-major `n x n`
    /// matrices of the contiguous `a` (overwritten by its factors): the
    /// pivots (`[count, n]`, 1-based) and the infos (`[count]`).
    pub(crate) fn getrf(&self, a: &Tensor, count: usize, n: usize) -> Result<(Tensor, Tensor)> {
        let dev = self.device();
        let ni = int(dev, "n", n)?;
        self.operand("cusolverDnXgetrf", a, count, n * n, false)?;
        let ipiv = self.ints(&[count, n])?;
        let info = self.ints(&[count])?;
        let (buf, name) = self.lib.getrf_buf[self.which];
        let mut lwork: c_int = 0;
        // SAFETY: the handle is live; `a` holds `count` column-major n x n
        // matrices (lda = n) on this device; `lwork` is a valid out-pointer.
        self.check(name, unsafe {
            buf(self.h(), ni, ni, self.at(a, 0, 0), ni, &mut lwork)
        })?;
        let (_ws, ws) = self.workspace(name, lwork)?;
        let (f, name) = self.lib.getrf[self.which];
        for k in 0..count {
            // SAFETY: matrix `k` of `a` (n * n elements), row `k` of `ipiv`
            // (n ints) and element `k` of `info` are inside their fresh
            // contiguous tensors; the workspace has the elements cuSOLVER
            // asked for and lives until after the call is queued.
            self.check(name, unsafe {
                f(
                    self.h(),
                    ni,
                    ni,
                    self.at(a, k, n * n),
                    ni,
                    ws,
                    self.at(&ipiv, k, n) as *mut c_int,
                    self.at(&info, k, 1) as *mut c_int,
                )
            })?;
        }
        a.bump_version();
        ipiv.bump_version();
        info.bump_version();
        Ok((ipiv, info))
    }

    /// Solves with the LU factors of [`Session::getrf`] (`trans`: with the
    /// transposed matrix) each of the `count` column-major `n x nrhs`
    /// right-hand sides of the contiguous `b`, overwritten by the solutions.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn getrs(
        &self,
        lu: &Tensor,
        ipiv: &Tensor,
        b: &Tensor,
        count: usize,
        n: usize,
        nrhs: usize,
        trans: bool,
    ) -> Result<()> {
        let dev = self.device();
        let ni = int(dev, "n", n)?;
        let ri = int(dev, "nrhs", nrhs)?;
        self.operand("cusolverDnXgetrs", lu, count, n * n, false)?;
        self.operand("cusolverDnXgetrs", ipiv, count, n, true)?;
        self.operand("cusolverDnXgetrs", b, count, n * nrhs, false)?;
        let info = self.ints(&[count])?;
        let (f, name) = self.lib.getrs[self.which];
        for k in 0..count {
            // SAFETY: matrix `k` of `lu` (n * n), its pivots (n ints) and
            // right-hand side `k` of `b` (n * nrhs, ldb = n) are inside their
            // contiguous tensors on this device; `info` has `count` ints.
            self.check(name, unsafe {
                f(
                    self.h(),
                    if trans { OP_T } else { OP_N },
                    ni,
                    ri,
                    self.at(lu, k, n * n),
                    ni,
                    self.at(ipiv, k, n) as *const c_int,
                    self.at(b, k, n * nrhs),
                    ni,
                    self.at(&info, k, 1) as *mut c_int,
                )
            })?;
        }
        b.bump_version();
        Ok(())
    }

    /// Cholesky of each of the `count` column-major `n x n` matrices of the
    /// contiguous `a`, read from (and written to) its upper triangle where
    /// `upper`, else its lower one; the infos (`[count]`).
    pub(crate) fn potrf(&self, a: &Tensor, count: usize, n: usize, upper: bool) -> Result<Tensor> {
        let dev = self.device();
        let ni = int(dev, "n", n)?;
        let uplo = if upper { FILL_UPPER } else { FILL_LOWER };
        self.operand("cusolverDnXpotrf", a, count, n * n, false)?;
        let info = self.ints(&[count])?;
        let (buf, name) = self.lib.potrf_buf[self.which];
        let mut lwork: c_int = 0;
        // SAFETY: as in `getrf`.
        self.check(name, unsafe {
            buf(self.h(), uplo, ni, self.at(a, 0, 0), ni, &mut lwork)
        })?;
        let (_ws, ws) = self.workspace(name, lwork)?;
        let (f, name) = self.lib.potrf[self.which];
        for k in 0..count {
            // SAFETY: matrix `k` of `a` and element `k` of `info` are inside
            // their contiguous tensors; the workspace holds `lwork` elements.
            self.check(name, unsafe {
                f(
                    self.h(),
                    uplo,
                    ni,
                    self.at(a, k, n * n),
                    ni,
                    ws,
                    lwork,
                    self.at(&info, k, 1) as *mut c_int,
                )
            })?;
        }
        a.bump_version();
        info.bump_version();
        Ok(info)
    }

    /// Householder QR of each of the `count` column-major `m x n` matrices
    /// of the contiguous `a` (lda = m), overwritten by R and the
    /// reflectors: the scalar factors (`[count, min(m, n)]`).
    pub(crate) fn geqrf(&self, a: &Tensor, count: usize, m: usize, n: usize) -> Result<Tensor> {
        let dev = self.device();
        let (mi, ni) = (int(dev, "m", m)?, int(dev, "n", n)?);
        let k = m.min(n);
        self.operand("cusolverDnXgeqrf", a, count, m * n, false)?;
        let tau = self.reals(&[count, k])?;
        let info = self.ints(&[count])?;
        let (buf, name) = self.lib.geqrf_buf[self.which];
        let mut lwork: c_int = 0;
        // SAFETY: as in `getrf` (an m x n matrix, lda = m).
        self.check(name, unsafe {
            buf(self.h(), mi, ni, self.at(a, 0, 0), mi, &mut lwork)
        })?;
        let (_ws, ws) = self.workspace(name, lwork)?;
        let (f, name) = self.lib.geqrf[self.which];
        for k_ in 0..count {
            // SAFETY: matrix `k_` of `a` (m * n), its `k` scalar factors and
            // its info are inside their contiguous tensors; the workspace
            // holds `lwork` elements.
            self.check(name, unsafe {
                f(
                    self.h(),
                    mi,
                    ni,
                    self.at(a, k_, m * n),
                    mi,
                    self.at(&tau, k_, k),
                    ws,
                    lwork,
                    self.at(&info, k_, 1) as *mut c_int,
                )
            })?;
        }
        a.bump_version();
        tau.bump_version();
        Ok(tau)
    }

    /// The first `cols` columns of Q from the `k` reflectors of
    /// [`Session::geqrf`]: the first `cols` columns of each of the `count`
    /// column-major matrices of the contiguous `a` (`m` rows, lda = m, `per`
    /// elements apart; its first `k` columns the reflectors) are
    /// overwritten by them.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn orgqr(
        &self,
        a: &Tensor,
        per: usize,
        tau: &Tensor,
        count: usize,
        m: usize,
        cols: usize,
        k: usize,
    ) -> Result<()> {
        let dev = self.device();
        let (mi, ci, ki) = (int(dev, "m", m)?, int(dev, "n", cols)?, int(dev, "k", k)?);
        if per < m * cols || k > cols || cols > m {
            return Err(failure(
                dev,
                "cusolverDnXorgqr",
                "internal: bad orgqr sizes",
            ));
        }
        self.operand("cusolverDnXorgqr", a, count, per, false)?;
        self.operand("cusolverDnXorgqr", tau, count, k, false)?;
        let info = self.ints(&[count])?;
        let (buf, name) = self.lib.orgqr_buf[self.which];
        let mut lwork: c_int = 0;
        // SAFETY: as in `getrf` (an m x cols matrix, lda = m, k factors).
        self.check(name, unsafe {
            buf(
                self.h(),
                mi,
                ci,
                ki,
                self.at(a, 0, 0),
                mi,
                self.at(tau, 0, 0),
                &mut lwork,
            )
        })?;
        let (_ws, ws) = self.workspace(name, lwork)?;
        let (f, name) = self.lib.orgqr[self.which];
        for j in 0..count {
            // SAFETY: matrix `j` of `a` (m * cols of its `per` elements,
            // per >= m * cols), its `k` factors in `tau`
            // and its info are inside their contiguous tensors; the
            // workspace holds `lwork` elements.
            self.check(name, unsafe {
                f(
                    self.h(),
                    mi,
                    ci,
                    ki,
                    self.at(a, j, per),
                    mi,
                    self.at(tau, j, k),
                    ws,
                    lwork,
                    self.at(&info, j, 1) as *mut c_int,
                )
            })?;
        }
        a.bump_version();
        Ok(())
    }

    /// The eigenvalues (ascending, `[count, n]`) and, with `vectors`, the
    /// eigenvectors (written over `a`, as its columns) of each of the
    /// `count` column-major symmetric `n x n` matrices of the contiguous
    /// `a`, read from its upper triangle where `upper`; the infos.
    pub(crate) fn syevd(
        &self,
        a: &Tensor,
        count: usize,
        n: usize,
        upper: bool,
        vectors: bool,
    ) -> Result<(Tensor, Tensor)> {
        let dev = self.device();
        let ni = int(dev, "n", n)?;
        let uplo = if upper { FILL_UPPER } else { FILL_LOWER };
        let jobz = if vectors { EIG_VECTOR } else { EIG_NOVECTOR };
        self.operand("cusolverDnXsyevd", a, count, n * n, false)?;
        let w = self.reals(&[count, n])?;
        let info = self.ints(&[count])?;
        let (buf, name) = self.lib.syevd_buf[self.which];
        let mut lwork: c_int = 0;
        // SAFETY: as in `getrf`; `w` has n elements for the first matrix.
        self.check(name, unsafe {
            buf(
                self.h(),
                jobz,
                uplo,
                ni,
                self.at(a, 0, 0),
                ni,
                self.at(&w, 0, 0),
                &mut lwork,
            )
        })?;
        let (_ws, ws) = self.workspace(name, lwork)?;
        let (f, name) = self.lib.syevd[self.which];
        for k in 0..count {
            // SAFETY: matrix `k` of `a` (n * n), its n eigenvalues in `w`
            // and its info are inside their contiguous tensors; the
            // workspace holds `lwork` elements.
            self.check(name, unsafe {
                f(
                    self.h(),
                    jobz,
                    uplo,
                    ni,
                    self.at(a, k, n * n),
                    ni,
                    self.at(&w, k, n),
                    ws,
                    lwork,
                    self.at(&info, k, 1) as *mut c_int,
                )
            })?;
        }
        a.bump_version();
        w.bump_version();
        info.bump_version();
        Ok((w, info))
    }

    /// The SVD of each of the `count` column-major `m x n` matrices of the
    /// contiguous `a` (`m >= n`, lda = m; destroyed): the singular values
    /// (`[count, n]`, nonincreasing), with `vectors` U (`[count, uc, m]`
    /// row-major, i.e. column-major `m x uc`, `uc` = m where `full`, else
    /// n) and Vᵀ (`[count, n, n]`, column-major `n x n`), and the infos.
    pub(crate) fn gesvd(
        &self,
        a: &Tensor,
        count: usize,
        m: usize,
        n: usize,
        vectors: bool,
        full: bool,
    ) -> Result<Gesvd> {
        let dev = self.device();
        if m < n {
            return Err(failure(dev, "cusolverDnXgesvd", "gesvd needs m >= n"));
        }
        let (mi, ni) = (int(dev, "m", m)?, int(dev, "n", n)?);
        self.operand("cusolverDnXgesvd", a, count, m * n, false)?;
        let uc = if full { m } else { n };
        let s = self.reals(&[count, n])?;
        let info = self.ints(&[count])?;
        let rwork = self.reals(&[n.max(1)])?;
        let (u, vt) = if vectors {
            (
                Some(self.reals(&[count, uc, m])?),
                Some(self.reals(&[count, n, n])?),
            )
        } else {
            (None, None)
        };
        let (jobu, jobvt): (u8, u8) = match (vectors, full) {
            (false, _) => (b'N', b'N'),
            (true, true) => (b'A', b'A'),
            // m >= n: the thin Vᵀ is the full one.
            (true, false) => (b'S', b'A'),
        };
        let (buf, name) = self.lib.gesvd_buf[self.which];
        let mut lwork: c_int = 0;
        // SAFETY: the handle is live; `lwork` is a valid out-pointer.
        self.check(name, unsafe { buf(self.h(), mi, ni, &mut lwork) })?;
        let (_ws, ws) = self.workspace(name, lwork)?;
        let (f, name) = self.lib.gesvd[self.which];
        let null: Ptr = std::ptr::null_mut();
        for k in 0..count {
            // SAFETY: matrix `k` of `a` (m * n), its n singular values, its
            // U (m * uc, ldu = m) and Vᵀ (n * n, ldvt = n) when asked for,
            // and its info are inside their contiguous tensors (U and Vᵀ
            // null, with valid leading dims, when not computed); `rwork`
            // holds min(m, n) - 1 elements at least and the workspace
            // `lwork`.
            self.check(name, unsafe {
                f(
                    self.h(),
                    jobu as c_schar,
                    jobvt as c_schar,
                    mi,
                    ni,
                    self.at(a, k, m * n),
                    mi,
                    self.at(&s, k, n),
                    u.as_ref().map_or(null, |u| self.at(u, k, m * uc)),
                    mi,
                    vt.as_ref().map_or(null, |v| self.at(v, k, n * n)),
                    ni,
                    ws,
                    lwork,
                    self.at(&rwork, 0, 0),
                    self.at(&info, k, 1) as *mut c_int,
                )
            })?;
        }
        for t in [Some(&s), Some(&info), u.as_ref(), vt.as_ref()]
            .into_iter()
            .flatten()
        {
            t.bump_version();
        }
        Ok(Gesvd { s, u, vt, info })
    }
}

/// What [`Session::gesvd`] computes.
pub(crate) struct Gesvd {
    pub s: Tensor,
    pub u: Option<Tensor>,
    pub vt: Option<Tensor>,
    pub info: Tensor,
}
