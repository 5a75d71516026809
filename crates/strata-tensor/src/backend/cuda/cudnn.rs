//! Convolutions through cuDNN, as PyTorch runs them: the forward pass, the
//! input's gradient and the weight's, each one cuDNN call per batch chunk on
//! the current stream, the algorithm chosen by cuDNN's heuristics
//! (`cudnnGet*Algorithm_v7`, PyTorch's choice when `cudnn.benchmark` is off)
//! and its workspace taken from strata's caching allocator.
//!
//! # Finding the library
//!
//! cuDNN is optional. It is searched for once per process, in order:
//! `$STRATA_CUDNN_LIBRARY` (the library file, or a folder holding it), then
//! `libcudnn.so.9` / `libcudnn.so.8` / `libcudnn.so` in the folders
//! `nvrtc::search_dirs` lists (`LD_LIBRARY_PATH`, the CUDA toolkit and the
//! `nvidia/cudnn/lib` folders of the usual Python environments: PyTorch's
//! wheels ship it there), then the loader path. cuDNN 9 loads its
//! sub-libraries (`libcudnn_cnn.so.9`, ...) by name at run time, so those in
//! the library's folder are loaded first by full path. Where none loads,
//! [`run`] answers `false` and the caller convolves by columns and matrix
//! products instead; [`version`] says why.
//!
//! # What goes through it
//!
//! Contiguous f16, bf16, f32 and f64 operands of 1 to 3 spatial dims (a 1-D
//! convolution is a 2-D one of height 1, as in PyTorch) whose padding cuDNN
//! can express: the same before and after each dim, which the output size
//! confirms. The descriptors use 32-bit sizes, so a batch whose input or
//! output has more than `i32::MAX` elements is run in chunks of samples (the
//! weight's gradient accumulated across them), as PyTorch does; a sample
//! that alone exceeds it goes back to the caller. f16 and bf16 are computed
//! in f32 (cuDNN's pseudo-half configurations) on tensor cores; f32 on TF32
//! tensor cores where `allow_tf32` says so, else exactly (`CUDNN_FMA_MATH`),
//! as `torch.backends.cudnn.allow_tf32`. Status codes are read as plain
//! integers, so a newer library cannot hand back a value Rust does not know.

use super::context::{cu_stream, failure, guarded, CudaDevice};
use super::launch::base_ptr;
use super::libraries::{candidates, symbol};
use crate::backend::{ConvPass, LibraryConv};
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use strata_alloc::{Allocation, Device};

/// The environment variable naming the cuDNN library (a file or a folder).
pub(crate) const LIBRARY_VAR: &str = "STRATA_CUDNN_LIBRARY";

/// cuDNN's status code as returned (0 is success).
type Status = u32;
/// Any cuDNN handle or descriptor (opaque pointers).
type Opaque = *mut c_void;

/// `cudnnConvolution*AlgoPerf_t` (the three have one layout): the algorithm,
/// its status, time, workspace, determinism and math type, as integers.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct AlgoPerf {
    algo: u32,
    status: u32,
    time: f32,
    memory: usize,
    determinism: u32,
    math_type: u32,
    reserved: [c_int; 3],
}

// cudnnDataType_t
const DATA_FLOAT: u32 = 0;
const DATA_DOUBLE: u32 = 1;
const DATA_HALF: u32 = 2;
const DATA_BFLOAT16: u32 = 9;
// cudnnTensorFormat_t
const TENSOR_NCHW: u32 = 0;
// cudnnConvolutionMode_t
const CROSS_CORRELATION: u32 = 1;
// cudnnMathType_t
const DEFAULT_MATH: u32 = 0;
const TENSOR_OP_MATH: u32 = 1;
const FMA_MATH: u32 = 3;
/// More than any cuDNN has algorithms of one kind (8, 6 and 7 in cuDNN 9).
const MAX_ALGOS: usize = 16;

type GetVersionFn = unsafe extern "C" fn() -> usize;
type GetErrorStringFn = unsafe extern "C" fn(Status) -> *const c_char;
type CreateFn = unsafe extern "C" fn(*mut Opaque) -> Status;
type DestroyFn = unsafe extern "C" fn(Opaque) -> Status;
type SetStreamFn = unsafe extern "C" fn(Opaque, *mut c_void) -> Status;
type SetTensorNdFn = unsafe extern "C" fn(Opaque, u32, c_int, *const c_int, *const c_int) -> Status;
type SetFilterNdFn = unsafe extern "C" fn(Opaque, u32, u32, c_int, *const c_int) -> Status;
type SetConvNdFn = unsafe extern "C" fn(
    Opaque,
    c_int,
    *const c_int,
    *const c_int,
    *const c_int,
    u32,
    u32,
) -> Status;
type SetIntFn = unsafe extern "C" fn(Opaque, c_int) -> Status;
type SetMathFn = unsafe extern "C" fn(Opaque, u32) -> Status;
type OutputDimFn = unsafe extern "C" fn(Opaque, Opaque, Opaque, c_int, *mut c_int) -> Status;
/// `cudnnGet*Algorithm_v7(handle, a, b, conv, c, requested, *returned, perf)`.
type GetAlgoFn = unsafe extern "C" fn(
    Opaque,
    Opaque,
    Opaque,
    Opaque,
    Opaque,
    c_int,
    *mut c_int,
    *mut AlgoPerf,
) -> Status;
/// `cudnnGet*WorkspaceSize(handle, a, b, conv, c, algo, *bytes)`.
type WorkspaceFn =
    unsafe extern "C" fn(Opaque, Opaque, Opaque, Opaque, Opaque, u32, *mut usize) -> Status;
/// `cudnnConvolution{Forward,BackwardData,BackwardFilter}(handle, alpha, a
/// desc, a, b desc, b, conv, algo, workspace, bytes, beta, out desc, out)`.
type ConvolveFn = unsafe extern "C" fn(
    Opaque,
    *const c_void,
    Opaque,
    *const c_void,
    Opaque,
    *const c_void,
    Opaque,
    u32,
    *mut c_void,
    usize,
    *const c_void,
    Opaque,
    *mut c_void,
) -> Status;

/// The three calls of one pass: the heuristics, the workspace query and the
/// convolution.
#[derive(Clone, Copy)]
struct PassFns {
    algorithms: GetAlgoFn,
    workspace: WorkspaceFn,
    convolve: ConvolveFn,
    name: &'static str,
}

/// The loaded library and the entry points strata calls.
struct Cudnn {
    /// Kept loaded for the life of the process (the pointers below point into it).
    _libs: Vec<libloading::Library>,
    path: String,
    version: usize,
    get_error_string: GetErrorStringFn,
    create: CreateFn,
    set_stream: SetStreamFn,
    create_tensor: CreateFn,
    set_tensor: SetTensorNdFn,
    destroy_tensor: DestroyFn,
    create_filter: CreateFn,
    set_filter: SetFilterNdFn,
    destroy_filter: DestroyFn,
    create_conv: CreateFn,
    set_conv: SetConvNdFn,
    set_groups: SetIntFn,
    set_math: SetMathFn,
    destroy_conv: DestroyFn,
    output_dim: OutputDimFn,
    forward: PassFns,
    input_grad: PassFns,
    weight_grad: PassFns,
}

/// cuDNN's sub-libraries in `path`'s folder (`libcudnn_*.so*`), loaded by
/// full path so that the library's own dlopen by name finds them; one may
/// need another loaded first, so the list is gone through until no more load.
fn sub_libraries(path: &Path) -> Vec<libloading::Library> {
    let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return Vec::new();
    };
    let mut rest: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("libcudnn_") && n.contains(".so"))
                })
                .collect()
        })
        .unwrap_or_default();
    rest.sort();
    let mut loaded = Vec::new();
    loop {
        let before = rest.len();
        rest.retain(|p| {
            // SAFETY: loading a cuDNN sub-library runs its initialisers, which
            // have no preconditions; the handle is kept with the library's.
            match unsafe { libloading::Library::new(p) } {
                Ok(l) => {
                    loaded.push(l);
                    false
                }
                Err(_) => true,
            }
        });
        if rest.is_empty() || rest.len() == before {
            return loaded;
        }
    }
}

fn load(path: &Path) -> std::result::Result<Cudnn, String> {
    let mut libs = sub_libraries(path);
    // SAFETY: loading cuDNN runs its initialisers, which have no
    // preconditions; the handle is stored in a process-wide `OnceLock` and
    // never dropped.
    let lib = unsafe { libloading::Library::new(path) }
        .map_err(|e| format!("{}: {e}", path.display()))?;
    // SAFETY (each `symbol` call): the types above are the signatures of
    // cuDNN 8 and 9's `cudnn_graph.h` / `cudnn_cnn.h` (enums and status codes
    // passed as `u32`, handles and descriptors as opaque pointers).
    let c = unsafe {
        let pass = |a: &str, w: &str, c: &str, name| -> std::result::Result<PassFns, String> {
            Ok(PassFns {
                algorithms: symbol(&lib, path, a)?,
                workspace: symbol(&lib, path, w)?,
                convolve: symbol(&lib, path, c)?,
                name,
            })
        };
        let get_version: GetVersionFn = symbol(&lib, path, "cudnnGetVersion")?;
        Cudnn {
            version: get_version(),
            get_error_string: symbol(&lib, path, "cudnnGetErrorString")?,
            create: symbol(&lib, path, "cudnnCreate")?,
            set_stream: symbol(&lib, path, "cudnnSetStream")?,
            create_tensor: symbol(&lib, path, "cudnnCreateTensorDescriptor")?,
            set_tensor: symbol(&lib, path, "cudnnSetTensorNdDescriptor")?,
            destroy_tensor: symbol(&lib, path, "cudnnDestroyTensorDescriptor")?,
            create_filter: symbol(&lib, path, "cudnnCreateFilterDescriptor")?,
            set_filter: symbol(&lib, path, "cudnnSetFilterNdDescriptor")?,
            destroy_filter: symbol(&lib, path, "cudnnDestroyFilterDescriptor")?,
            create_conv: symbol(&lib, path, "cudnnCreateConvolutionDescriptor")?,
            set_conv: symbol(&lib, path, "cudnnSetConvolutionNdDescriptor")?,
            set_groups: symbol(&lib, path, "cudnnSetConvolutionGroupCount")?,
            set_math: symbol(&lib, path, "cudnnSetConvolutionMathType")?,
            destroy_conv: symbol(&lib, path, "cudnnDestroyConvolutionDescriptor")?,
            output_dim: symbol(&lib, path, "cudnnGetConvolutionNdForwardOutputDim")?,
            forward: pass(
                "cudnnGetConvolutionForwardAlgorithm_v7",
                "cudnnGetConvolutionForwardWorkspaceSize",
                "cudnnConvolutionForward",
                "cudnnConvolutionForward",
            )?,
            input_grad: pass(
                "cudnnGetConvolutionBackwardDataAlgorithm_v7",
                "cudnnGetConvolutionBackwardDataWorkspaceSize",
                "cudnnConvolutionBackwardData",
                "cudnnConvolutionBackwardData",
            )?,
            weight_grad: pass(
                "cudnnGetConvolutionBackwardFilterAlgorithm_v7",
                "cudnnGetConvolutionBackwardFilterWorkspaceSize",
                "cudnnConvolutionBackwardFilter",
                "cudnnConvolutionBackwardFilter",
            )?,
            path: path.display().to_string(),
            _libs: Vec::new(),
        }
    };
    if c.version < 8000 {
        return Err(format!(
            "{}: cuDNN {} is older than 8.0, which strata needs",
            path.display(),
            c.version
        ));
    }
    libs.push(lib);
    Ok(Cudnn { _libs: libs, ..c })
}

/// The library, loaded once per process, or why it could not be.
fn library() -> std::result::Result<&'static Cudnn, String> {
    static LIB: OnceLock<std::result::Result<Cudnn, String>> = OnceLock::new();
    LIB.get_or_init(|| {
        // cuDNN 9's engines load cuBLASLt and NVRTC by name: make them
        // loadable first where strata can find them (each reports its own
        // absence when strata needs it).
        let _ = super::nvrtc::ensure_cublas();
        let _ = super::nvrtc::ensure_nvrtc();
        let (cands, searched) = candidates(
            LIBRARY_VAR,
            &["libcudnn.so.9", "libcudnn.so.8", "libcudnn.so"],
        );
        let mut tried = Vec::new();
        for c in &cands {
            match load(c) {
                Ok(l) => return Ok(l),
                Err(e) => tried.push(e),
            }
        }
        Err(format!(
            "the cuDNN library (libcudnn.so.9) was not found: searched {searched} (tried: {}); \
             install cuDNN or point {LIBRARY_VAR} at libcudnn.so.9 (PyTorch ships it in \
             site-packages/nvidia/cudnn/lib); convolutions run without it, more slowly",
            tried.join("; ")
        ))
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// cuDNN's version (`cudnnGetVersion`, e.g. 91002 for 9.10.2) and the file
/// it was loaded from, or why it cannot be loaded.
pub(crate) fn version() -> std::result::Result<(usize, String), String> {
    library().map(|l| (l.version, l.path.clone()))
}

/// One device's cuDNN handle and the algorithms chosen so far (held by
/// [`CudaDevice::dnn`]).
pub(crate) struct Handle {
    raw: Opaque,
    /// The candidate algorithms per problem, best first, each with its math
    /// type and workspace bytes (the heuristics asked once per problem).
    chosen: HashMap<Problem, Vec<Choice>>,
}

// SAFETY: a cuDNN handle may be used from any thread as long as calls on it
// are serialised, which the surrounding mutex guarantees.
unsafe impl Send for Handle {}

/// What the algorithm choice depends on.
#[derive(Clone, PartialEq, Eq, Hash)]
struct Problem {
    pass: ConvPass,
    dtype: DType,
    x: Vec<c_int>,
    w: Vec<c_int>,
    y: Vec<c_int>,
    geometry: [Vec<c_int>; 3],
    groups: c_int,
    math: u32,
}

#[derive(Clone, Copy)]
struct Choice {
    algo: u32,
    math: u32,
    workspace: usize,
}

/// The cuDNN dtype of `d` and the dtype it computes in, where cuDNN takes it.
fn data_type(d: DType) -> Option<(u32, u32)> {
    match d {
        DType::F32 => Some((DATA_FLOAT, DATA_FLOAT)),
        DType::F64 => Some((DATA_DOUBLE, DATA_DOUBLE)),
        DType::F16 => Some((DATA_HALF, DATA_FLOAT)),
        DType::BF16 => Some((DATA_BFLOAT16, DATA_FLOAT)),
        _ => None,
    }
}

/// The math type PyTorch asks for: tensor cores for f16 and bf16, FMA only
/// for f32 without TF32, else cuDNN's default (which allows TF32 for f32).
fn math_type(d: DType, allow_tf32: bool) -> u32 {
    match d {
        DType::F16 | DType::BF16 => TENSOR_OP_MATH,
        DType::F32 if !allow_tf32 => FMA_MATH,
        _ => DEFAULT_MATH,
    }
}

/// A cuDNN failure: the call and cuDNN's words.
fn status_error(lib: &Cudnn, device: Device, call: &str, s: Status) -> TensorError {
    // SAFETY: cudnnGetErrorString accepts any code and returns a static
    // string (or null, handled).
    let text = unsafe { (lib.get_error_string)(s) };
    let words = if text.is_null() {
        String::new()
    } else {
        // SAFETY: a non-null result is a NUL-terminated static string.
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    };
    failure(device, call, format!("{words} (cuDNN status {s})"))
}

/// The descriptors of one problem, destroyed when dropped.
struct Descriptors<'l> {
    lib: &'l Cudnn,
    x: Opaque,
    y: Opaque,
    w: Opaque,
    conv: Opaque,
}

impl Drop for Descriptors<'_> {
    fn drop(&mut self) {
        // SAFETY: each descriptor was created by this library (or is null,
        // which the destroy functions accept) and is destroyed once.
        unsafe {
            (self.lib.destroy_tensor)(self.x);
            (self.lib.destroy_tensor)(self.y);
            (self.lib.destroy_filter)(self.w);
            (self.lib.destroy_conv)(self.conv);
        }
    }
}

/// The packed (row-major) strides of `dims`.
fn packed(dims: &[c_int]) -> Vec<c_int> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

impl<'l> Descriptors<'l> {
    /// The descriptors of `p`; `None` where cuDNN refuses them.
    fn new(lib: &'l Cudnn, p: &Problem) -> Option<Descriptors<'l>> {
        let mut d = Descriptors {
            lib,
            x: std::ptr::null_mut(),
            y: std::ptr::null_mut(),
            w: std::ptr::null_mut(),
            conv: std::ptr::null_mut(),
        };
        let (data, compute) = data_type(p.dtype)?;
        let nb = p.x.len() as c_int;
        let spatial = p.geometry[0].len() as c_int;
        let [pad, stride, dilation] = &p.geometry;
        // SAFETY: every out-pointer is a field of `d`; the arrays hold `nb`
        // (tensors, filter) or `spatial` (convolution) values and outlive
        // the calls, which copy them.
        let ok = unsafe {
            (lib.create_tensor)(&mut d.x) == 0
                && (lib.create_tensor)(&mut d.y) == 0
                && (lib.create_filter)(&mut d.w) == 0
                && (lib.create_conv)(&mut d.conv) == 0
                && (lib.set_tensor)(d.x, data, nb, p.x.as_ptr(), packed(&p.x).as_ptr()) == 0
                && (lib.set_tensor)(d.y, data, nb, p.y.as_ptr(), packed(&p.y).as_ptr()) == 0
                && (lib.set_filter)(d.w, data, TENSOR_NCHW, nb, p.w.as_ptr()) == 0
                && (lib.set_conv)(
                    d.conv,
                    spatial,
                    pad.as_ptr(),
                    stride.as_ptr(),
                    dilation.as_ptr(),
                    CROSS_CORRELATION,
                    compute,
                ) == 0
                && (lib.set_groups)(d.conv, p.groups) == 0
                && (lib.set_math)(d.conv, p.math) == 0
        };
        if !ok {
            return None;
        }
        // The output cuDNN derives must be the planned one (it is not where
        // the padding differs before and after a dim).
        let mut out = vec![0 as c_int; p.y.len()];
        // SAFETY: `out` holds `nb` ints; the descriptors are set.
        let s = unsafe { (lib.output_dim)(d.conv, d.x, d.w, nb, out.as_mut_ptr()) };
        (s == 0 && out == p.y).then_some(d)
    }

    /// The pass's descriptors in cuDNN's argument order (the two read, then
    /// the one written).
    fn order(&self, pass: ConvPass) -> [Opaque; 3] {
        match pass {
            ConvPass::Forward => [self.x, self.w, self.y],
            ConvPass::InputGrad => [self.w, self.y, self.x],
            ConvPass::WeightGrad => [self.x, self.y, self.w],
        }
    }
}

impl Cudnn {
    fn pass(&self, pass: ConvPass) -> &PassFns {
        match pass {
            ConvPass::Forward => &self.forward,
            ConvPass::InputGrad => &self.input_grad,
            ConvPass::WeightGrad => &self.weight_grad,
        }
    }

    /// The heuristics' algorithms for `p` that cuDNN supports, best first,
    /// each with its workspace.
    fn choices(&self, h: Opaque, p: &Problem, d: &Descriptors) -> Vec<Choice> {
        let f = self.pass(p.pass);
        let [a, b, c] = d.order(p.pass);
        let mut perf = [AlgoPerf::default(); MAX_ALGOS];
        let mut n: c_int = 0;
        // SAFETY: `perf` holds MAX_ALGOS results and cuDNN writes at most the
        // requested count; the descriptors are set.
        let s = unsafe {
            (f.algorithms)(
                h,
                a,
                b,
                d.conv,
                c,
                MAX_ALGOS as c_int,
                &mut n,
                perf.as_mut_ptr(),
            )
        };
        if s != 0 {
            return Vec::new();
        }
        let mut out = Vec::new();
        for r in &perf[..(n.max(0) as usize).min(MAX_ALGOS)] {
            // Exact f32 asked for: only FMA kernels (PyTorch asserts the
            // same of the heuristics' answer).
            if r.status != 0 || (p.math == FMA_MATH && r.math_type != FMA_MATH) {
                continue;
            }
            // The workspace is asked for with the algorithm's math type set,
            // as it will run.
            let mut bytes = 0usize;
            // SAFETY: the descriptor is live; `bytes` is a valid out-pointer.
            let ok = unsafe {
                (self.set_math)(d.conv, r.math_type) == 0
                    && (f.workspace)(h, a, b, d.conv, c, r.algo, &mut bytes) == 0
            };
            if ok {
                out.push(Choice {
                    algo: r.algo,
                    math: r.math_type,
                    workspace: bytes,
                });
            }
        }
        out
    }
}

/// `shape` as cuDNN dims: a 1-D convolution's tensors get a unit height.
fn dims(shape: &[usize], spatial: usize) -> Option<Vec<c_int>> {
    let mut v: Vec<c_int> = Vec::with_capacity(shape.len() + 1);
    for (i, &s) in shape.iter().enumerate() {
        if i == 2 && spatial == 1 {
            v.push(1);
        }
        v.push(c_int::try_from(s).ok()?);
    }
    Some(v)
}

/// Runs `k` through cuDNN; `Ok(false)` where cuDNN is not available or does
/// not take this convolution (nothing was written then that the caller
/// keeps), an error where a cuDNN call the convolution needs fails.
pub(crate) fn run(dev: &CudaDevice, k: &LibraryConv) -> Result<bool> {
    let Ok(lib) = library() else {
        return Ok(false);
    };
    let dtype = k.x.dtype;
    if data_type(dtype).is_none()
        || [k.x, k.w, k.y]
            .iter()
            .any(|a| a.dtype != dtype || !a.layout.is_contiguous())
        || k.groups == 0
    {
        return Ok(false);
    }
    let win = k.windows;
    let spatial = win.spatial;
    let lead = 3 - spatial.max(2);
    let geometry = |v: &[usize; 3]| -> Option<Vec<c_int>> {
        v[lead..].iter().map(|&s| c_int::try_from(s).ok()).collect()
    };
    let (Some(pad), Some(stride), Some(dilation)) = (
        geometry(&win.pad),
        geometry(&win.stride),
        geometry(&win.dilation),
    ) else {
        return Ok(false);
    };
    let (Some(x), Some(w), Some(y), Ok(groups)) = (
        dims(&k.x.layout.shape, spatial),
        dims(&k.w.layout.shape, spatial),
        dims(&k.y.layout.shape, spatial),
        c_int::try_from(k.groups),
    ) else {
        return Ok(false);
    };
    let n = x[0] as usize;
    let numel = |d: &[c_int]| d[1..].iter().map(|&s| s as usize).product::<usize>();
    let per_sample = numel(&x).max(numel(&y));
    let limit = i32::MAX as usize;
    let weight_numel = w.iter().map(|&s| s as usize).product::<usize>();
    if n == 0 || per_sample == 0 || per_sample > limit || weight_numel > limit {
        return Ok(false);
    }
    let chunk = (limit / per_sample).min(n);
    let device = dev.device();
    dev.bind()?;
    let stream = dev.stream();
    let mut slot = dev.dnn.lock();
    let h = match &mut *slot {
        Some(h) => h,
        None => {
            let mut raw: Opaque = std::ptr::null_mut();
            // SAFETY: `raw` is a valid out-pointer; the device's context is
            // current on this thread.
            let s = unsafe { (lib.create)(&mut raw) };
            if s != 0 {
                return Err(status_error(lib, device, "cudnnCreate", s));
            }
            slot.insert(Handle {
                raw,
                chosen: HashMap::new(),
            })
        }
    };
    // SAFETY: the handle is live and the stream is a live stream of this
    // device.
    let s = unsafe { (lib.set_stream)(h.raw, cu_stream(stream) as *mut c_void) };
    if s != 0 {
        return Err(status_error(lib, device, "cudnnSetStream", s));
    }
    let elem = dtype.size();
    let mut first = 0usize;
    while first < n {
        let len = chunk.min(n - first);
        let with_batch = |d: &[c_int]| {
            let mut d = d.to_vec();
            d[0] = len as c_int;
            d
        };
        let p = Problem {
            pass: k.pass,
            dtype,
            x: with_batch(&x),
            w: w.clone(),
            y: with_batch(&y),
            geometry: [pad.clone(), stride.clone(), dilation.clone()],
            groups,
            math: math_type(dtype, k.allow_tf32),
        };
        let Some(desc) = Descriptors::new(lib, &p) else {
            return Ok(false);
        };
        let choices = match h.chosen.get(&p) {
            Some(c) => c.clone(),
            None => {
                let c = lib.choices(h.raw, &p, &desc);
                h.chosen.insert(p.clone(), c.clone());
                c
            }
        };
        // The weight's gradient adds up over the chunks after the first.
        let accumulate = k.pass == ConvPass::WeightGrad && first > 0;
        let offset =
            |a: &crate::backend::Arg, per: usize| base_ptr(a) + (first * per * elem) as u64;
        let ptrs = [
            offset(k.x, numel(&x)),
            base_ptr(k.w),
            offset(k.y, numel(&y)),
        ];
        if !convolve(lib, dev, h.raw, &p, &desc, &choices, ptrs, accumulate)? {
            return Ok(false);
        }
        first += len;
    }
    Ok(true)
}

/// One cuDNN call of `p` with the first of `choices` whose workspace can be
/// had (PyTorch's order), on `ptrs` (x, w, y). `Ok(false)` where no choice
/// is left.
#[allow(clippy::too_many_arguments)]
fn convolve(
    lib: &Cudnn,
    dev: &CudaDevice,
    h: Opaque,
    p: &Problem,
    d: &Descriptors,
    choices: &[Choice],
    ptrs: [u64; 3],
    accumulate: bool,
) -> Result<bool> {
    let device = dev.device();
    let f = lib.pass(p.pass);
    let [a, b, c] = d.order(p.pass);
    let [x, w, y] = ptrs;
    let [pa, pb, pc] = match p.pass {
        ConvPass::Forward => [x, w, y],
        ConvPass::InputGrad => [w, y, x],
        ConvPass::WeightGrad => [x, y, w],
    };
    let (one_f, zero_f) = (1f32, 0f32);
    let (one_d, zero_d) = (1f64, 0f64);
    let (alpha, beta): (*const c_void, *const c_void) = if p.dtype == DType::F64 {
        (
            (&one_d as *const f64).cast(),
            (if accumulate { &one_d } else { &zero_d } as *const f64).cast(),
        )
    } else {
        (
            (&one_f as *const f32).cast(),
            (if accumulate { &one_f } else { &zero_f } as *const f32).cast(),
        )
    };
    let mut last_err: Option<TensorError> = None;
    for choice in choices {
        let ws: Option<Allocation> = if choice.workspace == 0 {
            None
        } else {
            match dev.scratch(choice.workspace) {
                Ok(a) => Some(a),
                Err(e) => {
                    // PyTorch tries the next algorithm where the workspace
                    // cannot be had.
                    last_err = Some(e);
                    continue;
                }
            }
        };
        let ws_ptr = ws.as_ref().map_or(0, |a| a.ptr()) as usize as *mut c_void;
        let s = guarded(device, f.name, || {
            // SAFETY: the descriptors describe the packed operands whose
            // device addresses these are (each chunk inside its tensor, the
            // caller holding their storages); the workspace has the bytes
            // cuDNN asked for this algorithm and math type and lives until
            // after the call is queued (the caching allocator orders its reuse
            // after it on this stream); alpha and beta point to values of the
            // type cuDNN reads for this data type.
            Ok(unsafe {
                (lib.set_math)(d.conv, choice.math);
                (f.convolve)(
                    h,
                    alpha,
                    a,
                    pa as usize as *const c_void,
                    b,
                    pb as usize as *const c_void,
                    d.conv,
                    choice.algo,
                    ws_ptr,
                    choice.workspace,
                    beta,
                    c,
                    pc as usize as *mut c_void,
                )
            })
        })?;
        if s == 0 {
            return Ok(true);
        }
        if unsupported(lib, s) {
            // Another algorithm may take it; else the caller does.
            continue;
        }
        return Err(status_error(lib, device, f.name, s));
    }
    // No algorithm ran: a workspace that could not be had is the error
    // (columns would need more); else cuDNN does not take this one.
    last_err.map_or(Ok(false), Err)
}

/// Whether status `s` says cuDNN does not take the problem (a bad or
/// unsupported parameter), rather than that running it failed.
fn unsupported(lib: &Cudnn, s: Status) -> bool {
    if lib.version >= 9000 {
        // CUDNN_STATUS_BAD_PARAM* (2000-2999), CUDNN_STATUS_NOT_SUPPORTED* (3000-3999).
        (2000..4000).contains(&s)
    } else {
        // CUDNN_STATUS_BAD_PARAM, CUDNN_STATUS_NOT_SUPPORTED.
        s == 3 || s == 9
    }
}
