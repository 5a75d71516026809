//! Matrix products: f16, bf16, f32 and f64 through cuBLAS, one
//! `cublasGemmStridedBatchedEx` call per product on the current stream (f16
//! and bf16 on tensor cores accumulating in f32; f32 exact unless
//! [`crate::set_float32_matmul_precision`] allows TF32), the workspace taken
//! from strata's caching allocator with `cublasSetWorkspace_v2`, one per
//! stream, as PyTorch does; integers through a plain wrapping kernel.

use super::context::{cu_stream, failure, guarded, CudaDevice};
use super::kernels::ops::arith;
use super::kernels::{compute_ty, storage_ty, tag, PRELUDE};
use super::launch::{base_ptr, elementwise, launch, KArg, KernelParam, Params};
use crate::backend::{Arg, BinaryOp, Mem};
use crate::dtype::DType;
use crate::error::{Result, TensorError};
use crate::layout::Layout;
use cudarc::cublas::sys as cb;
use std::collections::HashMap;
use std::ffi::c_void;
use strata_alloc::{Allocation, StreamId};

/// Workspace per stream (PyTorch's size on Hopper).
const WORKSPACE: u64 = 32 << 20;

/// A device's cuBLAS handle and its workspace per stream (held by
/// [`CudaDevice::blas`]).
pub(crate) struct Handle {
    raw: cb::cublasHandle_t,
    workspaces: HashMap<StreamId, Allocation>,
    /// The stream the handle (and its workspace) is bound to now, so that
    /// back-to-back products on one stream skip `cublasSetStream_v2` and
    /// `cublasSetWorkspace_v2`.
    bound: Option<StreamId>,
}

// SAFETY: a cuBLAS handle may be used from any thread as long as calls on it
// are serialised, which the surrounding mutex guarantees.
unsafe impl Send for Handle {}

/// Runs `f` with the device's cuBLAS handle bound to the current stream and
/// that stream's workspace (from strata's allocator, `WORKSPACE` bytes).
fn with_handle(dev: &CudaDevice, f: impl FnOnce(cb::cublasHandle_t) -> Result<()>) -> Result<()> {
    let device = dev.device();
    super::nvrtc::ensure_cublas()
        .map_err(|reason| TensorError::BackendUnavailable { device, reason })?;
    dev.bind()?;
    let stream = dev.stream();
    let mut slot = dev.blas.lock();
    let h = match &mut *slot {
        Some(h) => h,
        None => {
            let raw = guarded(device, "cublasCreate_v2", || {
                let raw = cudarc::cublas::result::create_handle()
                    .map_err(|e| failure(device, "cublasCreate_v2", format!("{e:?}")))?;
                // SAFETY: `raw` was just created. The default math mode keeps
                // f32 exact (TF32 is asked for per call through the compute
                // type) and allows tensor cores for f16/bf16, as PyTorch.
                unsafe { cb::cublasSetMathMode(raw, cb::cublasMath_t::CUBLAS_DEFAULT_MATH) }
                    .result()
                    .map_err(|e| failure(device, "cublasSetMathMode", format!("{e:?}")))?;
                Ok(raw)
            })?;
            slot.insert(Handle {
                raw,
                workspaces: HashMap::new(),
                bound: None,
            })
        }
    };
    if h.bound != Some(stream) {
        if let std::collections::hash_map::Entry::Vacant(e) = h.workspaces.entry(stream) {
            e.insert(dev.allocator()?.allocate(WORKSPACE, stream)?);
        }
        let ws = h.workspaces[&stream].ptr();
        let raw = h.raw;
        guarded(device, "cublasSetStream_v2", || {
            // SAFETY: `raw` is a live handle of this device; the stream is live;
            // the workspace is device memory of WORKSPACE bytes kept alive in
            // the map for as long as the handle may use it on this stream.
            // cublasSetStream resets the workspace, so it is set after it.
            unsafe {
                cudarc::cublas::result::set_stream(raw, cu_stream(stream) as cb::cudaStream_t)
                    .map_err(|e| failure(device, "cublasSetStream_v2", format!("{e:?}")))?;
                cb::cublasSetWorkspace_v2(raw, ws as usize as *mut c_void, WORKSPACE as usize)
                    .result()
                    .map_err(|e| failure(device, "cublasSetWorkspace_v2", format!("{e:?}")))
            }
        })?;
        h.bound = Some(stream);
    }
    let raw = h.raw;
    guarded(device, "cuBLAS", || f(raw))
}

/// How a `rows x cols` matrix with strides `(sr, sc)` is seen by cuBLAS:
/// `(transposed, leading dim)` where not transposed means row-major.
fn mat_layout(rows: usize, cols: usize, sr: usize, sc: usize) -> Option<(bool, usize)> {
    if (sc == 1 || cols == 1) && (rows == 1 || sr >= cols.max(1)) {
        Some((false, if rows == 1 { cols.max(1) } else { sr }))
    } else if (sr == 1 || rows == 1) && (cols == 1 || sc >= rows.max(1)) {
        Some((true, if cols == 1 { rows.max(1) } else { sc }))
    } else {
        None
    }
}

/// A contiguous copy of `a` (for operands cuBLAS cannot address), in scratch
/// memory of the device.
fn contiguous_copy(dev: &CudaDevice, a: &Arg) -> Result<Allocation> {
    let n = a.layout.numel();
    let nbytes = n * a.dtype.size();
    let s = dev.scratch(nbytes)?;
    let out = Arg {
        mem: scratch_mem(dev, &s, nbytes),
        layout: Layout::contiguous(&a.layout.shape),
        dtype: a.dtype,
    };
    let d = a.dtype;
    elementwise(
        dev,
        "copy",
        || super::kernels::ops::cast(d, d),
        &out,
        &[a],
        Params::default(),
    )?;
    Ok(s)
}

/// The memory of a scratch allocation, borrowed from it.
fn scratch_mem<'a>(dev: &CudaDevice, s: &'a Allocation, nbytes: usize) -> Mem<'a> {
    Mem {
        ptr: s.ptr(),
        nbytes,
        device: dev.device(),
        life: std::marker::PhantomData,
    }
}

/// How cuBLAS multiplies a dtype: the element type of A, B and C, the
/// compute type, and whether alpha/beta are f64 (else f32).
fn gemm_types(dtype: DType, tf32: bool) -> (cb::cudaDataType, cb::cublasComputeType_t, bool) {
    use cb::cublasComputeType_t as C;
    use cb::cudaDataType as T;
    match dtype {
        DType::F64 => (T::CUDA_R_64F, C::CUBLAS_COMPUTE_64F, true),
        DType::F16 => (T::CUDA_R_16F, C::CUBLAS_COMPUTE_32F, false),
        DType::BF16 => (T::CUDA_R_16BF, C::CUBLAS_COMPUTE_32F, false),
        _ if tf32 => (T::CUDA_R_32F, C::CUBLAS_COMPUTE_32F_FAST_TF32, false),
        _ => (T::CUDA_R_32F, C::CUBLAS_COMPUTE_32F, false),
    }
}

/// Batched `out[b] = a[b] @ b[b]`; operands `[B, m, k]`, `[B, k, n]` with any
/// strides (batch stride 0 for a broadcast operand), out a fresh contiguous
/// `[B, m, n]`. Floats go through one `cublasGemmStridedBatchedEx` call:
/// f16/bf16 on tensor cores with f32 accumulation (`CUBLAS_COMPUTE_32F`), f32
/// exact or, with [`crate::set_float32_matmul_precision`] above `Highest`, on
/// TF32 tensor cores; f64 in f64. A matrix whose rows or columns have unit
/// stride is passed as it is, transposed or not; only a matrix with neither
/// (a strided slice, a broadcast row) is copied first. With `accumulate`,
/// `out` (contiguous) holds a value on entry and receives `out + a @ b`:
/// cuBLAS's `beta = 1`, the sum formed in the compute type and rounded once
/// (integers: the kernel's sum starts from `out`).
pub(crate) fn matmul(
    dev: &CudaDevice,
    out: &Arg,
    a: &Arg,
    b: &Arg,
    accumulate: bool,
) -> Result<()> {
    let (bs, m, k) = (a.layout.shape[0], a.layout.shape[1], a.layout.shape[2]);
    let n = b.layout.shape[2];
    if bs == 0 || m == 0 || n == 0 {
        return Ok(());
    }
    match a.dtype {
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => {}
        _ => return integer(dev, out, a, b, accumulate),
    }
    if accumulate && out.dtype != DType::F32 && matches!(a.dtype, DType::F16 | DType::BF16) {
        return accumulate_half(dev, out, a, b);
    }
    if k == 0 {
        if accumulate {
            return Ok(());
        }
        return elementwise(
            dev,
            "fill",
            super::kernels::ops::fill,
            out,
            &[],
            Params::default(),
        );
    }
    // Operands cuBLAS cannot address directly are copied first.
    let a_tmp;
    let b_tmp;
    let mut a_arg = Arg {
        mem: a.mem,
        layout: a.layout.clone(),
        dtype: a.dtype,
    };
    let mut b_arg = Arg {
        mem: b.mem,
        layout: b.layout.clone(),
        dtype: b.dtype,
    };
    let sa = &a.layout.strides;
    let la = match mat_layout(m, k, sa[1], sa[2]) {
        Some(l) => l,
        None => {
            a_tmp = contiguous_copy(dev, a)?;
            a_arg = Arg {
                mem: scratch_mem(dev, &a_tmp, a.layout.numel() * a.dtype.size()),
                layout: Layout::contiguous(&a.layout.shape),
                dtype: a.dtype,
            };
            (false, k)
        }
    };
    let sb = &b.layout.strides;
    let lb = match mat_layout(k, n, sb[1], sb[2]) {
        Some(l) => l,
        None => {
            b_tmp = contiguous_copy(dev, b)?;
            b_arg = Arg {
                mem: scratch_mem(dev, &b_tmp, b.layout.numel() * b.dtype.size()),
                layout: Layout::contiguous(&b.layout.shape),
                dtype: b.dtype,
            };
            (false, n)
        }
    };
    let (pa, pb, pc) = (base_ptr(&a_arg), base_ptr(&b_arg), base_ptr(out));
    let batch_stride = |l: &Layout| if bs == 1 { 0 } else { l.strides[0] as i64 };
    let (stride_a, stride_b) = (batch_stride(&a_arg.layout), batch_stride(&b_arg.layout));
    let stride_c = (m * n) as i64;
    let op = |t: bool| {
        if t {
            cb::cublasOperation_t::CUBLAS_OP_T
        } else {
            cb::cublasOperation_t::CUBLAS_OP_N
        }
    };
    let device = dev.device();
    let dtype = a.dtype;
    // TF32 is allowed unless the precision is `Highest` (PyTorch's `allow_tf32`;
    // a convolution's products follow its own setting, `set_conv_allow_tf32`).
    let tf32 = dtype == DType::F32
        && crate::ops::effective_f32_precision() != crate::ops::Precision::Highest;
    let (ty, compute, wide) = gemm_types(dtype, tf32);
    // C and D in f32 for a half-precision product accumulated in f32
    // (`accumulate_half`), else in the operands' type.
    let c_ty = if out.dtype == dtype {
        ty
    } else {
        cb::cudaDataType::CUDA_R_32F
    };
    // The 32-bit entry point unless a size needs the `_64` one (cuBLAS 12+).
    let small = [m, n, k, bs, la.1, lb.1]
        .iter()
        .all(|&v| i32::try_from(v).is_ok());
    let beta = if accumulate { 1.0 } else { 0.0 };
    let (alpha32, beta32) = (1.0f32, beta as f32);
    let (alpha64, beta64) = (1.0f64, beta);
    let (alpha, beta): (*const c_void, *const c_void) = if wide {
        (
            &alpha64 as *const f64 as *const c_void,
            &beta64 as *const f64 as *const c_void,
        )
    } else {
        (
            &alpha32 as *const f32 as *const c_void,
            &beta32 as *const f32 as *const c_void,
        )
    };
    let algo = cb::cublasGemmAlgo_t::CUBLAS_GEMM_DFALT;
    with_handle(dev, |h| {
        // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: B first, m and n swapped.
        // SAFETY: every pointer is device memory of this device holding the
        // operand's elements of type `ty` at the leading dims and batch strides
        // given (checked by `mat_layout`, or a fresh contiguous copy); out is a
        // fresh contiguous [B, m, n] tensor of `ty`; alpha/beta point to host
        // scalars of the compute type's scale type (f64 for 64F, else f32) that
        // live until the call returns; the sizes fit the entry point's ints.
        let r = unsafe {
            if small {
                cb::cublasGemmStridedBatchedEx(
                    h,
                    op(lb.0),
                    op(la.0),
                    n as i32,
                    m as i32,
                    k as i32,
                    alpha,
                    pb as usize as *const c_void,
                    ty,
                    lb.1 as i32,
                    stride_b,
                    pa as usize as *const c_void,
                    ty,
                    la.1 as i32,
                    stride_a,
                    beta,
                    pc as usize as *mut c_void,
                    c_ty,
                    n as i32,
                    stride_c,
                    bs as i32,
                    compute,
                    algo,
                )
            } else {
                cb::cublasGemmStridedBatchedEx_64(
                    h,
                    op(lb.0),
                    op(la.0),
                    n as i64,
                    m as i64,
                    k as i64,
                    alpha,
                    pb as usize as *const c_void,
                    ty,
                    lb.1 as i64,
                    stride_b,
                    pa as usize as *const c_void,
                    ty,
                    la.1 as i64,
                    stride_a,
                    beta,
                    pc as usize as *mut c_void,
                    c_ty,
                    n as i64,
                    stride_c,
                    bs as i64,
                    compute,
                    algo,
                )
            }
        };
        r.result().map_err(|e| {
            failure(
                device,
                "cublasGemmStridedBatchedEx",
                format!("{e:?} ({dtype} [{bs}, {m}, {k}] @ [{bs}, {k}, {n}])"),
            )
        })
    })
}

/// `out += a @ b` for f16/bf16 operands and output with one rounding.
/// cuBLAS with a half-precision C (`beta = 1`) rounds the product to the
/// half type before adding C (measured on the H200 with bf16: of the
/// elements where it matters, 18425 rounded twice and 74 once; the
/// `CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION` mode changes nothing),
/// which loses an addend far below the product's last place, such as a
/// Linear's bias early in training. So the sum is formed in f32 scratch
/// memory: `out` widened, the product accumulated into it by cuBLAS in f32
/// (half A and B, f32 C), then rounded once into `out`, as PyTorch's
/// `addmm` (cuBLASLt's bias epilogue) does.
fn accumulate_half(dev: &CudaDevice, out: &Arg, a: &Arg, b: &Arg) -> Result<()> {
    let n = out.layout.numel();
    let s = dev.scratch(n * DType::F32.size())?;
    let wide = Arg {
        mem: scratch_mem(dev, &s, n * DType::F32.size()),
        layout: Layout::contiguous(&out.layout.shape),
        dtype: DType::F32,
    };
    let d = out.dtype;
    let cast = super::kernels::ops::cast;
    elementwise(
        dev,
        "copy",
        || cast(d, DType::F32),
        &wide,
        &[out],
        Params::default(),
    )?;
    matmul(dev, &wide, a, b, true)?;
    elementwise(
        dev,
        "copy",
        || cast(DType::F32, d),
        out,
        &[&wide],
        Params::default(),
    )
}

/// Sizes and element strides of an integer matmul, laid out as `MM` in the source.
#[repr(C)]
#[derive(Clone, Copy)]
struct MM {
    bs: i64,
    m: i64,
    n: i64,
    k: i64,
    sa: [i64; 3],
    sb: [i64; 3],
    so: [i64; 3],
    /// 1: the sum starts from `out`'s value.
    accumulate: i64,
}

// SAFETY: `#[repr(C)]` of i64s only (no padding), laid out as `MM` in the source.
unsafe impl KernelParam for MM {}

/// Integer matmul with wrapping arithmetic, one thread per output element
/// (with `accumulate`, each sum starts from `out`'s element).
fn integer(dev: &CudaDevice, out: &Arg, a: &Arg, b: &Arg, accumulate: bool) -> Result<()> {
    let d = a.dtype;
    let key = format!("imatmul:{}", tag(d));
    let src = || {
        format!(
            "{PRELUDE}typedef {t} T;\ntypedef {c} C;\n\
             struct MM {{ i64 bs, m, n, k; i64 sa[3]; i64 sb[3]; i64 so[3]; i64 accumulate; }};\n\
             extern \"C\" __global__ void imm(char* o, const char* a, const char* b, MM z) {{\n\
               const i64 total = z.bs * z.m * z.n;\n\
               for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (i64)gridDim.x * blockDim.x) {{\n\
                 const i64 j = t % z.n; const i64 i = (t / z.n) % z.m; const i64 q = t / (z.n * z.m);\n\
                 T* dst = reinterpret_cast<T*>(o) + q * z.so[0] + i * z.so[1] + j * z.so[2];\n\
                 C acc = z.accumulate ? (C)*dst : (C)0;\n\
                 for (i64 p = 0; p < z.k; p++) {{\n\
                   const C x = (C)reinterpret_cast<const T*>(a)[q * z.sa[0] + i * z.sa[1] + p * z.sa[2]];\n\
                   const C y = (C)reinterpret_cast<const T*>(b)[q * z.sb[0] + p * z.sb[1] + j * z.sb[2]];\n\
                   acc = {add};\n\
                 }}\n\
                 *dst = (T)acc;\n\
               }}\n\
             }}\n",
            t = storage_ty(d),
            c = compute_ty(d),
            add = arith(BinaryOp::Add, d, "acc", &arith(BinaryOp::Mul, d, "x", "y")),
        )
    };
    let f = super::nvrtc::functions(dev, &key, src, &["imm"])?[0];
    let s3 = |l: &Layout| {
        [
            l.strides[0] as i64,
            l.strides[1] as i64,
            l.strides[2] as i64,
        ]
    };
    let z = MM {
        bs: a.layout.shape[0] as i64,
        m: a.layout.shape[1] as i64,
        n: b.layout.shape[2] as i64,
        k: a.layout.shape[2] as i64,
        sa: s3(&a.layout),
        sb: s3(&b.layout),
        so: s3(&out.layout),
        accumulate: i64::from(accumulate),
    };
    let total = (z.bs * z.m * z.n) as u64;
    let grid = total.div_ceil(256).min(1 << 20) as u32;
    let (po, pa, pb) = (base_ptr(out), base_ptr(a), base_ptr(b));
    let kargs = [KArg::of(&po), KArg::of(&pa), KArg::of(&pb), KArg::of(&z)];
    // SAFETY: the parameters match `imm(char*, const char*, const char*, MM)`;
    // indices stay below each operand's shape, so addresses lie in its layout.
    unsafe { launch(dev, &key, f, (grid, 1, 1), (256, 1, 1), dev.stream(), kargs) }
}
