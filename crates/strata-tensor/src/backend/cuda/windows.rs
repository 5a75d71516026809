//! The CUDA kernels of the sliding-window ops ([`NnKernel::Im2col`] and its
//! adjoint, max and average pooling and the latter's backward). Each
//! thread owns one spatial position of a plane (a window, or an input
//! element for the adjoints) along `blockIdx.x`'s grid-stride loop and
//! walks the `[N, C]` planes along `blockIdx.y`'s; for its position it
//! loops over the kernel's offsets, so the position is split into
//! coordinates once and neighbouring threads read and write neighbouring
//! elements. The adjoints gather (each input element sums the entries that
//! read it), so no atomics are needed and the sums are deterministic, in
//! the order of the CPU kernels (`cpu/windows.rs`): by kernel offset for
//! the columns, by window for average pooling.
//!
//! [`NnKernel::Im2col`]: crate::backend::NnKernel::Im2col

use super::context::CudaDevice;
use super::kernels::{compute_ty, load, storage_ty, store, tag, PRELUDE};
use super::launch::{base_ptr, launch, KArg, KernelParam};
use super::nn::bits_ty;
use crate::backend::Arg;
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{AvgMode, Windows};

/// Threads per block.
const NT: u32 = 256;

/// The kernels' metadata, laid out as `WMeta` in the source (all i64: no
/// padding).
#[repr(C)]
#[derive(Clone, Copy)]
struct WMeta {
    planes: i64,
    c: i64,
    on: i64,
    ln: i64,
    kn: i64,
    sb: i64,
    sc: i64,
    sx: [i64; 3],
    l: [i64; 3],
    o: [i64; 3],
    k: [i64; 3],
    s: [i64; 3],
    p: [i64; 3],
    d: [i64; 3],
    cip: i64,
    ovr: i64,
    has_ovr: i64,
}

// SAFETY: `#[repr(C)]`, i64s only (no padding), laid out as `WMeta` in the
// source; no pointers.
unsafe impl KernelParam for WMeta {}

const HEADER: &str = r#"
struct WMeta { i64 planes; i64 c; i64 on; i64 ln; i64 kn; i64 sb; i64 sc; i64 sx[3]; i64 l[3]; i64 o[3];
               i64 k[3]; i64 s[3]; i64 p[3]; i64 d[3]; i64 cip; i64 ovr; i64 has_ovr; };
__device__ __forceinline__ i64 imin(i64 a, i64 b) { return a < b ? a : b; }
__device__ __forceinline__ i64 imax(i64 a, i64 b) { return a > b ? a : b; }
// Average pooling's divisor of window (o0, o1, o2).
__device__ __forceinline__ i64 divisor_of(const WMeta& m, i64 o0, i64 o1, i64 o2) {
  if (m.has_ovr) return m.ovr;
  const i64 o[3] = {o0, o1, o2};
  i64 padded = 1, inside = 1;
  for (int d = 0; d < 3; ++d) {
    const i64 st = o[d] * m.s[d] - m.p[d];
    const i64 en = imin(st + m.k[d], m.l[d] + m.p[d]);
    padded *= en - st;
    inside *= imin(en, m.l[d]) - imax(st, 0);
  }
  return m.cip ? padded : inside;
}
// The window o of kernel offset k along dim d that reads input coordinate
// i (-1 where none does).
__device__ __forceinline__ i64 window_of(const WMeta& m, int d, i64 i, i64 k) {
  const i64 q = i + m.p[d] - k * m.d[d];
  if (q < 0 || q % m.s[d] != 0) return -1;
  const i64 o = q / m.s[d];
  return o < m.o[d] ? o : -1;
}
#define FOR_POS(v, n) for (i64 v = blockIdx.x * (i64)blockDim.x + threadIdx.x; v < (n); v += (i64)gridDim.x * blockDim.x)
#define FOR_PLANE(bc) for (i64 bc = blockIdx.y; bc < m.planes; bc += gridDim.y)
"#;

/// Columns: element bits copied (any dtype).
fn im2col_source(esize: usize) -> String {
    format!(
        "{PRELUDE}{HEADER}typedef {e} E;\n{body}",
        e = bits_ty(esize),
        body = r#"
extern "C" __global__ void im2col(E* cols, const E* x, WMeta m) {
  FOR_POS(o, m.on) {
    const i64 o2 = o % m.o[2], t = o / m.o[2], o1 = t % m.o[1], o0 = t / m.o[1];
    const i64 b0 = o0 * m.s[0] - m.p[0], b1 = o1 * m.s[1] - m.p[1], b2 = o2 * m.s[2] - m.p[2];
    FOR_PLANE(bc) {
      const E* xp = x + (bc / m.c) * m.sb + (bc % m.c) * m.sc;
      E* out = cols + bc * m.kn * m.on + o;
      for (i64 k0 = 0; k0 < m.k[0]; ++k0) {
        const i64 i0 = b0 + k0 * m.d[0];
        const bool ok0 = i0 >= 0 && i0 < m.l[0];
        for (i64 k1 = 0; k1 < m.k[1]; ++k1) {
          const i64 i1 = b1 + k1 * m.d[1];
          const bool ok1 = ok0 && i1 >= 0 && i1 < m.l[1];
          for (i64 k2 = 0; k2 < m.k[2]; ++k2) {
            const i64 i2 = b2 + k2 * m.d[2];
            const bool ok = ok1 && i2 >= 0 && i2 < m.l[2];
            *out = ok ? xp[i0 * m.sx[0] + i1 * m.sx[1] + i2 * m.sx[2]] : (E)0;
            out += m.on;
          }
        }
      }
    }
  }
}
"#
    )
}

/// The typed kernels: col2im, max and average pooling, its backward.
fn typed_source(d: DType, lowest: &str) -> String {
    let add = if d == DType::I64 {
        "(A)((u64)a + (u64)b)"
    } else {
        "a + b"
    };
    let mean = if d == DType::I64 {
        "sdiv<i64, u64>(s, dv)"
    } else {
        "s / (A)dv"
    };
    format!(
        "{PRELUDE}{HEADER}typedef {e} E;\ntypedef {a} A;\n\
         __device__ __forceinline__ A ld(E v) {{ return {ld}; }}\n\
         __device__ __forceinline__ E st(A v) {{ return {st}; }}\n\
         __device__ __forceinline__ A add(A a, A b) {{ return {add}; }}\n\
         __device__ __forceinline__ A mean(A s, i64 dv) {{ return {mean}; }}\n\
         #define LOWEST ({lowest})\n{body}",
        e = storage_ty(d),
        a = compute_ty(d),
        ld = load(d, "v"),
        st = store(d, "v"),
        body = r#"
extern "C" __global__ void col2im(E* x, const E* cols, WMeta m) {
  FOR_POS(l, m.ln) {
    const i64 l2 = l % m.l[2], t = l / m.l[2], l1 = t % m.l[1], l0 = t / m.l[1];
    FOR_PLANE(bc) {
      const E* cp = cols + bc * m.kn * m.on;
      A acc = (A)0;
      for (i64 k0 = 0; k0 < m.k[0]; ++k0) {
        const i64 o0 = window_of(m, 0, l0, k0);
        if (o0 < 0) continue;
        for (i64 k1 = 0; k1 < m.k[1]; ++k1) {
          const i64 o1 = window_of(m, 1, l1, k1);
          if (o1 < 0) continue;
          for (i64 k2 = 0; k2 < m.k[2]; ++k2) {
            const i64 o2 = window_of(m, 2, l2, k2);
            if (o2 < 0) continue;
            const i64 k = (k0 * m.k[1] + k1) * m.k[2] + k2;
            acc = add(acc, ld(cp[k * m.on + (o0 * m.o[1] + o1) * m.o[2] + o2]));
          }
        }
      }
      x[bc * m.ln + l] = st(acc);
    }
  }
}

extern "C" __global__ void max_pool(E* values, i64* indices, const E* x, WMeta m) {
  FOR_POS(o, m.on) {
    const i64 o2 = o % m.o[2], t = o / m.o[2], o1 = t % m.o[1], o0 = t / m.o[1];
    const i64 b[3] = {o0 * m.s[0] - m.p[0], o1 * m.s[1] - m.p[1], o2 * m.s[2] - m.p[2]};
    i64 f[3];
    for (int d = 0; d < 3; ++d) f[d] = b[d] < 0 ? b[d] + (-b[d] + m.d[d] - 1) / m.d[d] * m.d[d] : b[d];
    const i64 first = (f[0] * m.l[1] + f[1]) * m.l[2] + f[2];
    FOR_PLANE(bc) {
      const E* xp = x + (bc / m.c) * m.sb + (bc % m.c) * m.sc;
      A best = LOWEST;
      i64 bi = first;
      bool any = false;
      for (i64 k0 = 0; k0 < m.k[0]; ++k0) {
        const i64 i0 = b[0] + k0 * m.d[0];
        if (i0 < 0 || i0 >= m.l[0]) continue;
        for (i64 k1 = 0; k1 < m.k[1]; ++k1) {
          const i64 i1 = b[1] + k1 * m.d[1];
          if (i1 < 0 || i1 >= m.l[1]) continue;
          for (i64 k2 = 0; k2 < m.k[2]; ++k2) {
            const i64 i2 = b[2] + k2 * m.d[2];
            if (i2 < 0 || i2 >= m.l[2]) continue;
            const A v = ld(xp[i0 * m.sx[0] + i1 * m.sx[1] + i2 * m.sx[2]]);
            if (!any || v > best || isnan_(v)) {
              best = v;
              bi = (i0 * m.l[1] + i1) * m.l[2] + i2;
              any = true;
            }
          }
        }
      }
      values[bc * m.on + o] = st(best);
      indices[bc * m.on + o] = bi;
    }
  }
}

extern "C" __global__ void avg_pool(E* out, const E* x, WMeta m) {
  FOR_POS(o, m.on) {
    const i64 o2 = o % m.o[2], t = o / m.o[2], o1 = t % m.o[1], o0 = t / m.o[1];
    const i64 b0 = o0 * m.s[0] - m.p[0], b1 = o1 * m.s[1] - m.p[1], b2 = o2 * m.s[2] - m.p[2];
    const i64 dv = divisor_of(m, o0, o1, o2);
    FOR_PLANE(bc) {
      const E* xp = x + (bc / m.c) * m.sb + (bc % m.c) * m.sc;
      A s = (A)0;
      for (i64 k0 = 0; k0 < m.k[0]; ++k0) {
        const i64 i0 = b0 + k0 * m.d[0];
        if (i0 < 0 || i0 >= m.l[0]) continue;
        for (i64 k1 = 0; k1 < m.k[1]; ++k1) {
          const i64 i1 = b1 + k1 * m.d[1];
          if (i1 < 0 || i1 >= m.l[1]) continue;
          for (i64 k2 = 0; k2 < m.k[2]; ++k2) {
            const i64 i2 = b2 + k2 * m.d[2];
            if (i2 < 0 || i2 >= m.l[2]) continue;
            s = add(s, ld(xp[i0 * m.sx[0] + i1 * m.sx[1] + i2 * m.sx[2]]));
          }
        }
      }
      out[bc * m.on + o] = st(mean(s, dv));
    }
  }
}

// Kernel offsets from the last, so an element's windows come in output
// order, as the CPU kernel adds them.
extern "C" __global__ void avg_pool_backward(E* dx, const E* dy, WMeta m) {
  FOR_POS(l, m.ln) {
    const i64 l2 = l % m.l[2], t = l / m.l[2], l1 = t % m.l[1], l0 = t / m.l[1];
    FOR_PLANE(bc) {
      const E* gp = dy + bc * m.on;
      A acc = (A)0;
      for (i64 k0 = m.k[0] - 1; k0 >= 0; --k0) {
        const i64 o0 = window_of(m, 0, l0, k0);
        if (o0 < 0) continue;
        for (i64 k1 = m.k[1] - 1; k1 >= 0; --k1) {
          const i64 o1 = window_of(m, 1, l1, k1);
          if (o1 < 0) continue;
          for (i64 k2 = m.k[2] - 1; k2 >= 0; --k2) {
            const i64 o2 = window_of(m, 2, l2, k2);
            if (o2 < 0) continue;
            acc = add(acc, mean(ld(gp[(o0 * m.o[1] + o1) * m.o[2] + o2]), divisor_of(m, o0, o1, o2)));
          }
        }
      }
      dx[bc * m.ln + l] = st(acc);
    }
  }
}
"#
    )
}

/// The C expression of max pooling's start value for `d`: the tensor
/// layer's lowest value of the dtype (-inf for floats, the integer minimum).
fn lowest_literal(d: DType) -> &'static str {
    match d {
        DType::F64 => "__longlong_as_double(0xfff0000000000000ULL)",
        DType::F32 | DType::F16 | DType::BF16 => "__int_as_float(0xff800000)",
        DType::I64 => "(-9223372036854775807LL - 1)",
        DType::I32 => "(-2147483647 - 1)",
        _ => "0",
    }
}

/// The metadata of `windows` over `planes` = N * C planes of `c` channels,
/// with the strides of the `[N, C, L...]` operand `x` where one is read
/// strided.
fn meta(windows: &Windows, n: usize, c: usize, x: Option<&Arg>, mode: Option<AvgMode>) -> WMeta {
    let i = |a: [usize; 3]| a.map(|v| v as i64);
    let (mut sb, mut sc, mut sx) = (0i64, 0i64, [0i64; 3]);
    if let Some(x) = x {
        let st = &x.layout.strides;
        sb = st[0] as i64;
        sc = st[1] as i64;
        for (j, &s) in st[2..].iter().enumerate() {
            sx[3 - windows.spatial + j] = s as i64;
        }
    }
    let mode = mode.unwrap_or(AvgMode {
        count_include_pad: true,
        divisor_override: None,
    });
    WMeta {
        planes: (n * c) as i64,
        c: c as i64,
        on: windows.out_numel() as i64,
        ln: windows.input_numel() as i64,
        kn: windows.kernel_numel() as i64,
        sb,
        sc,
        sx,
        l: i(windows.input),
        o: i(windows.out),
        k: i(windows.kernel),
        s: i(windows.stride),
        p: i(windows.pad),
        d: i(windows.dilation),
        cip: i64::from(mode.count_include_pad),
        ovr: mode.divisor_override.unwrap_or(0),
        has_ovr: i64::from(mode.divisor_override.is_some()),
    }
}

/// The grid of a kernel over `positions` per plane and `planes` planes.
fn grid(positions: i64, planes: i64) -> (u32, u32, u32) {
    let x = (positions as u64).div_ceil(u64::from(NT)).clamp(1, 1 << 20) as u32;
    let y = planes.clamp(1, 65_535) as u32;
    (x, y, 1)
}

/// One window op, as `crate::backend::NnKernel` names it.
pub(crate) enum WindowOp<'a> {
    Im2col {
        cols: &'a Arg<'a>,
        x: &'a Arg<'a>,
    },
    Col2im {
        x: &'a Arg<'a>,
        cols: &'a Arg<'a>,
    },
    MaxPool {
        values: &'a Arg<'a>,
        indices: &'a Arg<'a>,
        x: &'a Arg<'a>,
    },
    AvgPool {
        out: &'a Arg<'a>,
        x: &'a Arg<'a>,
        mode: AvgMode,
    },
    AvgPoolBackward {
        dx: &'a Arg<'a>,
        dy: &'a Arg<'a>,
        mode: AvgMode,
    },
}

/// Runs `op` over `windows` on `dev`'s current stream (the tensor layer
/// checked the shapes: every operand `[N, C, ...]` of the windows' sizes,
/// the outputs and the adjoints' inputs contiguous).
pub(crate) fn run(dev: &CudaDevice, windows: &Windows, op: WindowOp) -> Result<()> {
    let stream = dev.stream();
    match op {
        WindowOp::Im2col { cols, x } => {
            let (n, c) = (x.layout.shape[0], x.layout.shape[1]);
            let m = meta(windows, n, c, Some(x), None);
            let es = x.dtype.size();
            let key = format!("windows:im2col:{es}");
            let f = super::nvrtc::functions(dev, &key, || im2col_source(es), &["im2col"])?;
            let (pc, px) = (base_ptr(cols), base_ptr(x));
            // SAFETY: parameters match `im2col` (cols, x, WMeta); cols is
            // the contiguous `[N, C * K, O]` the metadata's sizes describe,
            // and x is read at coordinates inside its shape through its own
            // strides.
            unsafe {
                launch(
                    dev,
                    "im2col",
                    f[0],
                    grid(m.on, m.planes),
                    (NT, 1, 1),
                    stream,
                    [KArg::of(&pc), KArg::of(&px), KArg::of(&m)],
                )
            }
        }
        WindowOp::Col2im { x, cols } => {
            let (n, c) = (x.layout.shape[0], x.layout.shape[1]);
            let m = meta(windows, n, c, None, None);
            let f = typed(dev, x.dtype)?;
            let (px, pc) = (base_ptr(x), base_ptr(cols));
            // SAFETY: parameters match `col2im` (x, cols, WMeta); both are
            // contiguous with the sizes the metadata describes.
            unsafe {
                launch(
                    dev,
                    "col2im",
                    f[0],
                    grid(m.ln, m.planes),
                    (NT, 1, 1),
                    stream,
                    [KArg::of(&px), KArg::of(&pc), KArg::of(&m)],
                )
            }
        }
        WindowOp::MaxPool { values, indices, x } => {
            let (n, c) = (x.layout.shape[0], x.layout.shape[1]);
            let m = meta(windows, n, c, Some(x), None);
            let f = typed(dev, x.dtype)?;
            let (pv, pi, px) = (base_ptr(values), base_ptr(indices), base_ptr(x));
            // SAFETY: parameters match `max_pool` (values, indices, x,
            // WMeta); values and indices are contiguous `[N, C, O...]`, x is
            // read inside its shape through its own strides.
            unsafe {
                launch(
                    dev,
                    "max_pool",
                    f[1],
                    grid(m.on, m.planes),
                    (NT, 1, 1),
                    stream,
                    [KArg::of(&pv), KArg::of(&pi), KArg::of(&px), KArg::of(&m)],
                )
            }
        }
        WindowOp::AvgPool { out, x, mode } => {
            let (n, c) = (x.layout.shape[0], x.layout.shape[1]);
            let m = meta(windows, n, c, Some(x), Some(mode));
            let f = typed(dev, x.dtype)?;
            let (po, px) = (base_ptr(out), base_ptr(x));
            // SAFETY: parameters match `avg_pool` (out, x, WMeta); out is
            // contiguous `[N, C, O...]`, x is read inside its shape.
            unsafe {
                launch(
                    dev,
                    "avg_pool",
                    f[2],
                    grid(m.on, m.planes),
                    (NT, 1, 1),
                    stream,
                    [KArg::of(&po), KArg::of(&px), KArg::of(&m)],
                )
            }
        }
        WindowOp::AvgPoolBackward { dx, dy, mode } => {
            let (n, c) = (dx.layout.shape[0], dx.layout.shape[1]);
            let m = meta(windows, n, c, None, Some(mode));
            let f = typed(dev, dx.dtype)?;
            let (pdx, pdy) = (base_ptr(dx), base_ptr(dy));
            // SAFETY: parameters match `avg_pool_backward` (dx, dy, WMeta);
            // both contiguous with the sizes the metadata describes.
            unsafe {
                launch(
                    dev,
                    "avg_pool_backward",
                    f[3],
                    grid(m.ln, m.planes),
                    (NT, 1, 1),
                    stream,
                    [KArg::of(&pdx), KArg::of(&pdy), KArg::of(&m)],
                )
            }
        }
    }
}

/// The typed kernels of dtype `d`.
fn typed(dev: &CudaDevice, d: DType) -> Result<std::sync::Arc<[super::context::Function]>> {
    let key = format!("windows:typed:{}", tag(d));
    super::nvrtc::functions(
        dev,
        &key,
        || typed_source(d, lowest_literal(d)),
        &["col2im", "max_pool", "avg_pool", "avg_pool_backward"],
    )
}
