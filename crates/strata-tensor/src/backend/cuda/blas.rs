//! Matrix products: f32/f64 through cuBLAS (`cublas{S,D}gemmStridedBatched`
//! on the current stream, plain FP32 math as on the CPU, the workspace taken
//! from strata's caching allocator with `cublasSetWorkspace_v2`, one per
//! stream, as PyTorch does); integers through a plain wrapping kernel.

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
}

// SAFETY: a cuBLAS handle may be used from any thread as long as calls on it
// are serialised, which the surrounding mutex guarantees.
unsafe impl Send for Handle {}

/// Runs `f` with the device's cuBLAS handle bound to the current stream and
/// that stream's workspace.
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
                cudarc::cublas::result::create_handle()
                    .map_err(|e| failure(device, "cublasCreate_v2", format!("{e:?}")))
            })?;
            slot.insert(Handle {
                raw,
                workspaces: HashMap::new(),
            })
        }
    };
    if let std::collections::hash_map::Entry::Vacant(e) = h.workspaces.entry(stream) {
        let ws = strata_alloc::allocator(device)?.allocate(WORKSPACE, stream)?;
        e.insert(ws);
    }
    let ws = &h.workspaces[&stream];
    let raw = h.raw;
    guarded(device, "cuBLAS", || {
        // SAFETY: `raw` is a live handle of this device; the stream is live;
        // the workspace is device memory of WORKSPACE bytes kept alive in the
        // map for as long as the handle may use it on this stream.
        unsafe {
            cudarc::cublas::result::set_stream(raw, cu_stream(stream) as cb::cudaStream_t)
                .map_err(|e| failure(device, "cublasSetStream_v2", format!("{e:?}")))?;
            cb::cublasSetWorkspace_v2(raw, ws.ptr() as usize as *mut c_void, WORKSPACE as usize)
                .result()
                .map_err(|e| failure(device, "cublasSetWorkspace_v2", format!("{e:?}")))?;
        }
        f(raw)
    })
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

/// Batched `out[b] = a[b] @ b[b]`; operands `[B, m, k]`, `[B, k, n]`, out a
/// fresh contiguous `[B, m, n]`.
pub(crate) fn matmul(dev: &CudaDevice, out: &Arg, a: &Arg, b: &Arg) -> Result<()> {
    let (bs, m, k) = (a.layout.shape[0], a.layout.shape[1], a.layout.shape[2]);
    let n = b.layout.shape[2];
    if bs == 0 || m == 0 || n == 0 {
        return Ok(());
    }
    match a.dtype {
        DType::F32 | DType::F64 => {}
        _ => return integer(dev, out, a, b),
    }
    if k == 0 {
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
    let sa = a.layout.strides.clone();
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
    let sb = b.layout.strides.clone();
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
    let stride_a = if bs == 1 {
        0
    } else {
        a_arg.layout.strides[0] as i64
    };
    let stride_b = if bs == 1 {
        0
    } else {
        b_arg.layout.strides[0] as i64
    };
    let stride_c = (m * n) as i64;
    let op = |t: bool| {
        if t {
            cb::cublasOperation_t::CUBLAS_OP_T
        } else {
            cb::cublasOperation_t::CUBLAS_OP_N
        }
    };
    let too_big = |v: usize| -> Result<i32> {
        i32::try_from(v).map_err(|_| {
            failure(
                dev.device(),
                "cuBLAS gemm",
                format!("dimension {v} exceeds cuBLAS's 32-bit sizes"),
            )
        })
    };
    let (mi, ni, ki, bi) = (too_big(m)?, too_big(n)?, too_big(k)?, too_big(bs)?);
    let (lda, ldb) = (too_big(la.1)?, too_big(lb.1)?);
    let device = dev.device();
    let dtype = a.dtype;
    with_handle(dev, |h| {
        // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ: B first, m and n swapped.
        // SAFETY: every pointer is device memory of this device holding the
        // operand's elements at the leading dims and batch strides given (checked
        // by `mat_layout`, or a fresh contiguous copy); out is a fresh contiguous
        // [B, m, n] tensor; alpha/beta are host scalars alive for the call.
        let r = unsafe {
            match dtype {
                DType::F32 => {
                    let (alpha, beta) = (1.0f32, 0.0f32);
                    cb::cublasSgemmStridedBatched(
                        h,
                        op(lb.0),
                        op(la.0),
                        ni,
                        mi,
                        ki,
                        &alpha,
                        pb as usize as *const f32,
                        ldb,
                        stride_b,
                        pa as usize as *const f32,
                        lda,
                        stride_a,
                        &beta,
                        pc as usize as *mut f32,
                        ni,
                        stride_c,
                        bi,
                    )
                }
                _ => {
                    let (alpha, beta) = (1.0f64, 0.0f64);
                    cb::cublasDgemmStridedBatched(
                        h,
                        op(lb.0),
                        op(la.0),
                        ni,
                        mi,
                        ki,
                        &alpha,
                        pb as usize as *const f64,
                        ldb,
                        stride_b,
                        pa as usize as *const f64,
                        lda,
                        stride_a,
                        &beta,
                        pc as usize as *mut f64,
                        ni,
                        stride_c,
                        bi,
                    )
                }
            }
        };
        r.result()
            .map_err(|e| failure(device, "cuBLAS gemm", format!("{e:?}")))
    })
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
}

// SAFETY: `#[repr(C)]`, laid out as `MM` in the source.
unsafe impl KernelParam for MM {}

/// Integer matmul with wrapping arithmetic, one thread per output element.
fn integer(dev: &CudaDevice, out: &Arg, a: &Arg, b: &Arg) -> Result<()> {
    let d = a.dtype;
    let key = format!("imatmul:{}", tag(d));
    let src = || {
        format!(
            "{PRELUDE}typedef {t} T;\ntypedef {c} C;\n\
             struct MM {{ i64 bs, m, n, k; i64 sa[3]; i64 sb[3]; i64 so[3]; }};\n\
             extern \"C\" __global__ void imm(char* o, const char* a, const char* b, MM z) {{\n\
               const i64 total = z.bs * z.m * z.n;\n\
               for (i64 t = (i64)blockIdx.x * blockDim.x + threadIdx.x; t < total; t += (i64)gridDim.x * blockDim.x) {{\n\
                 const i64 j = t % z.n; const i64 i = (t / z.n) % z.m; const i64 q = t / (z.n * z.m);\n\
                 C acc = (C)0;\n\
                 for (i64 p = 0; p < z.k; p++) {{\n\
                   const C x = (C)reinterpret_cast<const T*>(a)[q * z.sa[0] + i * z.sa[1] + p * z.sa[2]];\n\
                   const C y = (C)reinterpret_cast<const T*>(b)[q * z.sb[0] + p * z.sb[1] + j * z.sb[2]];\n\
                   acc = {add};\n\
                 }}\n\
                 reinterpret_cast<T*>(o)[q * z.so[0] + i * z.so[1] + j * z.so[2]] = (T)acc;\n\
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
    };
    let total = (z.bs * z.m * z.n) as u64;
    let grid = total.div_ceil(256).min(1 << 20) as u32;
    let (po, pa, pb) = (base_ptr(out), base_ptr(a), base_ptr(b));
    let kargs = [KArg::of(&po), KArg::of(&pa), KArg::of(&pb), KArg::of(&z)];
    // SAFETY: the parameters match `imm(char*, const char*, const char*, MM)`;
    // indices stay below each operand's shape, so addresses lie in its layout.
    unsafe { launch(dev, &key, f, (grid, 1, 1), (256, 1, 1), dev.stream(), kargs) }
}
