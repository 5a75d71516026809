//! The CUDA kernels of the sliding-window ops ([`WindowKernel::Im2col`] and its
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
//! [`WindowKernel::Im2col`]: crate::backend::WindowKernel::Im2col

use super::context::CudaDevice;
use super::kernels::{compute_ty, load, storage_ty, store, tag, PRELUDE};
use super::launch::{base_ptr, launch, KArg, KernelParam};
use super::nn::bits_ty;
use crate::backend::{Arg, WindowKernel};
use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{AvgMode, Windows};

/// Threads per block.
const NT: u32 = 256;

/// The kernels' metadata, laid out as `WMeta` in the source: all of one
/// index type `I` (i32 where every position and count fits 2^30, else
/// i64), so there is no padding.
#[repr(C)]
#[derive(Clone, Copy)]
struct WMeta<I> {
    planes: I,
    c: I,
    on: I,
    ln: I,
    kn: I,
    sb: I,
    sc: I,
    sx: [I; 3],
    l: [I; 3],
    o: [I; 3],
    k: [I; 3],
    s: [I; 3],
    p: [I; 3],
    d: [I; 3],
    cip: I,
    ovr: I,
    has_ovr: I,
}

// SAFETY: `#[repr(C)]`, fields of one primitive integer type (no padding),
// laid out as `WMeta` in the source with `I` that type; no pointers.
unsafe impl KernelParam for WMeta<i32> {}
// SAFETY: as above.
unsafe impl KernelParam for WMeta<i64> {}

const HEADER: &str = r#"
struct WMeta { I planes; I c; I on; I ln; I kn; I sb; I sc; I sx[3]; I l[3]; I o[3];
               I k[3]; I s[3]; I p[3]; I d[3]; I cip; I ovr; I has_ovr; };
__device__ __forceinline__ I imin(I a, I b) { return a < b ? a : b; }
__device__ __forceinline__ I imax(I a, I b) { return a > b ? a : b; }
// Average pooling's divisor of window (o0, o1, o2).
__device__ __forceinline__ i64 divisor_of(const WMeta& m, I o0, I o1, I o2) {
  if (m.has_ovr) return m.ovr;
  const I o[3] = {o0, o1, o2};
  i64 padded = 1, inside = 1;
  for (int d = 0; d < 3; ++d) {
    const I st = o[d] * m.s[d] - m.p[d];
    const I en = imin(st + m.k[d], m.l[d] + m.p[d]);
    padded *= en - st;
    inside *= imin(en, m.l[d]) - imax(st, 0);
  }
  return m.cip ? padded : inside;
}
// Splits flat position v of a plane of `size` into coordinates.
__device__ __forceinline__ void split(I v, const I* size, I& a, I& b, I& c) {
  c = v % size[2];
  const I t = v / size[2];
  b = t % size[1];
  a = t / size[1];
}
// The kernel offsets [lo, hi) of window o along dim d that land inside the
// input (PyTorch's clipped window: the work is bounded by the input, however
// large the kernel or the padding).
__device__ __forceinline__ void inside(const WMeta& m, int d, I o, I& lo, I& hi) {
  const I start = o * m.s[d] - m.p[d], room = m.l[d] - start;
  lo = start < 0 ? (-start + m.d[d] - 1) / m.d[d] : 0;
  hi = room > 0 ? imin((room + m.d[d] - 1) / m.d[d], m.k[d]) : 0;
  if (hi < lo) hi = lo;
}
// Calls f(i0, i1, i2) with each input element of window (o0, o1, o2), in
// scan order.
template <class F> __device__ __forceinline__ void each_element(const WMeta& m, I o0, I o1, I o2, F f) {
  const I b0 = o0 * m.s[0] - m.p[0], b1 = o1 * m.s[1] - m.p[1], b2 = o2 * m.s[2] - m.p[2];
  I lo0, hi0, lo1, hi1, lo2, hi2;
  inside(m, 0, o0, lo0, hi0);
  inside(m, 1, o1, lo1, hi1);
  inside(m, 2, o2, lo2, hi2);
  for (I k0 = lo0; k0 < hi0; ++k0)
    for (I k1 = lo1; k1 < hi1; ++k1)
      for (I k2 = lo2; k2 < hi2; ++k2) f(b0 + k0 * m.d[0], b1 + k1 * m.d[1], b2 + k2 * m.d[2]);
}
// The windows [lo, hi] along dim d that can hold input coordinate l (each
// holds it where l + pad - o * stride is a multiple of the dilation).
__device__ __forceinline__ void holding(const WMeta& m, int d, I l, I& lo, I& hi) {
  const I q = l + m.p[d], reach = (m.k[d] - 1) * m.d[d];
  lo = q > reach ? (q - reach + m.s[d] - 1) / m.s[d] : 0;
  hi = imin(q / m.s[d], m.o[d] - 1);
}
// Calls f(k, o) with each window o (flat) that holds input element (l0, l1,
// l2) and the flat kernel offset k that reads it: by kernel offset (windows
// from the last), or with REV in output order.
template <bool REV, class F> __device__ __forceinline__ void each_window_of(const WMeta& m, I l0, I l1, I l2, F f) {
  I lo[3], hi[3];
  const I l[3] = {l0, l1, l2};
  for (int d = 0; d < 3; ++d) holding(m, d, l[d], lo[d], hi[d]);
  for (I j0 = lo[0]; j0 <= hi[0]; ++j0) {
    const I o0 = REV ? j0 : hi[0] + lo[0] - j0;
    const I q0 = l0 + m.p[0] - o0 * m.s[0];
    if (q0 % m.d[0] != 0) continue;
    for (I j1 = lo[1]; j1 <= hi[1]; ++j1) {
      const I o1 = REV ? j1 : hi[1] + lo[1] - j1;
      const I q1 = l1 + m.p[1] - o1 * m.s[1];
      if (q1 % m.d[1] != 0) continue;
      for (I j2 = lo[2]; j2 <= hi[2]; ++j2) {
        const I o2 = REV ? j2 : hi[2] + lo[2] - j2;
        const I q2 = l2 + m.p[2] - o2 * m.s[2];
        if (q2 % m.d[2] != 0) continue;
        f((q0 / m.d[0] * m.k[1] + q1 / m.d[1]) * m.k[2] + q2 / m.d[2], (o0 * m.o[1] + o1) * m.o[2] + o2);
      }
    }
  }
}
#define FOR_POS(v, n) for (I v = (I)(blockIdx.x * blockDim.x + threadIdx.x); v < (n); v += (I)(gridDim.x * blockDim.x))
#define FOR_PLANE(bc) for (I bc = (I)blockIdx.y; bc < m.planes; bc += (I)gridDim.y)
"#;

/// Columns: element bits copied (any dtype).
fn im2col_source(esize: usize, idx: &str) -> String {
    format!(
        "{PRELUDE}typedef {idx} I;\n{HEADER}typedef {e} E;\n{body}",
        e = bits_ty(esize),
        body = r#"
extern "C" __global__ void im2col(E* cols, const E* x, WMeta m) {
  FOR_POS(o, m.on) {
    I o0, o1, o2;
    split(o, m.o, o0, o1, o2);
    const I b0 = o0 * m.s[0] - m.p[0], b1 = o1 * m.s[1] - m.p[1], b2 = o2 * m.s[2] - m.p[2];
    FOR_PLANE(bc) {
      const E* xp = x + (bc / m.c) * m.sb + (bc % m.c) * m.sc;
      E* out = cols + bc * m.kn * m.on + o;
      for (I k0 = 0; k0 < m.k[0]; ++k0) {
        const I i0 = b0 + k0 * m.d[0];
        const bool ok0 = i0 >= 0 && i0 < m.l[0];
        for (I k1 = 0; k1 < m.k[1]; ++k1) {
          const I i1 = b1 + k1 * m.d[1];
          const bool ok1 = ok0 && i1 >= 0 && i1 < m.l[1];
          for (I k2 = 0; k2 < m.k[2]; ++k2) {
            const I i2 = b2 + k2 * m.d[2];
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
fn typed_source(d: DType, lowest: &str, idx: &str) -> String {
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
        "{PRELUDE}typedef {idx} I;\n{HEADER}typedef {e} E;\ntypedef {a} A;\n\
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
    I l0, l1, l2;
    split(l, m.l, l0, l1, l2);
    FOR_PLANE(bc) {
      const E* cp = cols + bc * m.kn * m.on;
      A acc = (A)0;
      each_window_of<false>(m, l0, l1, l2, [&](I k, I o) { acc = add(acc, ld(cp[k * m.on + o])); });
      x[bc * m.ln + l] = st(acc);
    }
  }
}

extern "C" __global__ void max_pool(E* values, i64* indices, const E* x, WMeta m) {
  FOR_POS(o, m.on) {
    I o0, o1, o2;
    split(o, m.o, o0, o1, o2);
    const I b[3] = {o0 * m.s[0] - m.p[0], o1 * m.s[1] - m.p[1], o2 * m.s[2] - m.p[2]};
    I f[3];
    for (int d = 0; d < 3; ++d) f[d] = b[d] < 0 ? b[d] + (-b[d] + m.d[d] - 1) / m.d[d] * m.d[d] : b[d];
    const i64 first = ((i64)f[0] * m.l[1] + f[1]) * m.l[2] + f[2];
    FOR_PLANE(bc) {
      const E* xp = x + (bc / m.c) * m.sb + (bc % m.c) * m.sc;
      A best = LOWEST;
      i64 bi = first;
      bool any = false;
      each_element(m, o0, o1, o2, [&](I i0, I i1, I i2) {
        const A v = ld(xp[i0 * m.sx[0] + i1 * m.sx[1] + i2 * m.sx[2]]);
        if (!any || v > best || isnan_(v)) {
          best = v;
          bi = ((i64)i0 * m.l[1] + i1) * m.l[2] + i2;
          any = true;
        }
      });
      values[bc * m.on + o] = st(best);
      indices[bc * m.on + o] = bi;
    }
  }
}

extern "C" __global__ void avg_pool(E* out, const E* x, WMeta m) {
  FOR_POS(o, m.on) {
    I o0, o1, o2;
    split(o, m.o, o0, o1, o2);
    const i64 dv = divisor_of(m, o0, o1, o2);
    FOR_PLANE(bc) {
      const E* xp = x + (bc / m.c) * m.sb + (bc % m.c) * m.sc;
      A s = (A)0;
      each_element(m, o0, o1, o2, [&](I i0, I i1, I i2) { s = add(s, ld(xp[i0 * m.sx[0] + i1 * m.sx[1] + i2 * m.sx[2]])); });
      out[bc * m.on + o] = st(mean(s, dv));
    }
  }
}

// An element's windows in output order, as the CPU kernel adds them.
extern "C" __global__ void avg_pool_backward(E* dx, const E* dy, WMeta m) {
  FOR_POS(l, m.ln) {
    I l0, l1, l2;
    split(l, m.l, l0, l1, l2);
    FOR_PLANE(bc) {
      const E* gp = dy + bc * m.on;
      A acc = (A)0;
      each_window_of<true>(m, l0, l1, l2, [&](I, I o) {
        I o0, o1, o2;
        split(o, m.o, o0, o1, o2);
        acc = add(acc, mean(ld(gp[o]), divisor_of(m, o0, o1, o2)));
      });
      dx[bc * m.ln + l] = st(acc);
    }
  }
}

// The gradient of max pooling: an element sums the gradients of the windows
// holding it whose index names it, in window order.
extern "C" __global__ void max_pool_backward(E* dx, const E* dy, const i64* idx, WMeta m) {
  FOR_POS(l, m.ln) {
    I l0, l1, l2;
    split(l, m.l, l0, l1, l2);
    FOR_PLANE(bc) {
      const E* gp = dy + bc * m.on;
      const i64* ip = idx + bc * m.on;
      A acc = (A)0;
      each_window_of<true>(m, l0, l1, l2, [&](I, I o) {
        if (ip[o] == (i64)l) acc = add(acc, ld(gp[o]));
      });
      dx[bc * m.ln + l] = st(acc);
    }
  }
}
"#
    )
}

/// The C expression of max pooling's start value for `d`: the dtype's
/// lowest value, as `ops::windows::lowest` gives the CPU (-inf for floats,
/// the integer minimum).
fn lowest_literal(d: DType) -> &'static str {
    match d {
        DType::F64 => "__longlong_as_double(0xfff0000000000000ULL)",
        DType::F32 | DType::F16 | DType::BF16 => "__int_as_float(0xff800000)",
        DType::I64 => "(-9223372036854775807LL - 1)",
        DType::I32 => "(-2147483647 - 1)",
        _ => "0",
    }
}

/// The metadata of `windows` over `n * c` planes of `c` channels, with
/// the strides of the `[N, C, L...]` operand `x` where one is read strided.
fn meta(
    windows: &Windows,
    n: usize,
    c: usize,
    x: Option<&Arg>,
    mode: Option<AvgMode>,
) -> WMeta<i64> {
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

/// Below this every position, offset and count of a launch is computed in
/// 32 bits (with room for a grid-stride step past the end).
const NARROW: u128 = 1 << 30;

impl WMeta<i64> {
    /// The metadata in i32 where every value the kernels form fits
    /// [`NARROW`]: element counts of the operands, the strided operand's
    /// span, and per dim the farthest position a window names.
    fn narrow(&self, x: Option<&Arg>) -> Option<WMeta<i32>> {
        let u = |v: i64| v.unsigned_abs() as u128;
        let planes = u(self.planes);
        let mut most = [
            planes * u(self.kn) * u(self.on),
            planes * u(self.ln),
            planes * u(self.on),
            u(self.ovr),
        ]
        .into_iter()
        .max()
        .unwrap_or(0);
        if let Some(x) = x {
            let span: u128 = (x.layout.shape.iter())
                .zip(&x.layout.strides)
                .map(|(&n, &s)| n.saturating_sub(1) as u128 * s as u128)
                .sum();
            most = most.max(span + 1);
        }
        for d in 0..3 {
            let far = u(self.o[d]) * u(self.s[d])
                + u(self.k[d]) * u(self.d[d])
                + u(self.l[d])
                + u(self.p[d]);
            most = most.max(far);
        }
        if most >= NARROW {
            return None;
        }
        let n = |v: i64| v as i32;
        let a = |v: [i64; 3]| v.map(n);
        Some(WMeta {
            planes: n(self.planes),
            c: n(self.c),
            on: n(self.on),
            ln: n(self.ln),
            kn: n(self.kn),
            sb: n(self.sb),
            sc: n(self.sc),
            sx: a(self.sx),
            l: a(self.l),
            o: a(self.o),
            k: a(self.k),
            s: a(self.s),
            p: a(self.p),
            d: a(self.d),
            cip: n(self.cip),
            ovr: n(self.ovr),
            has_ovr: n(self.has_ovr),
        })
    }
}

/// The grid of a kernel over `positions` per plane and `planes` planes.
fn grid(positions: i64, planes: i64) -> (u32, u32, u32) {
    let x = (positions as u64).div_ceil(u64::from(NT)).clamp(1, 1 << 20) as u32;
    let y = planes.clamp(1, 65_535) as u32;
    (x, y, 1)
}

/// Runs `op` over `windows` on `dev`'s current stream (the tensor layer
/// checked the shapes: every operand `[N, C, ...]` of the windows' sizes,
/// the outputs and the adjoints' inputs contiguous).
pub(crate) fn run(dev: &CudaDevice, windows: &Windows, op: WindowKernel) -> Result<()> {
    // The operand whose `[N, C]` gives the planes, the strided input (if
    // any), the positions each thread walks (windows or input elements),
    // the pointers in the kernel's order, its name and dtype.
    let (planes_of, strided, per_input, ptrs, name, dtype, mode): (
        &Arg,
        Option<&Arg>,
        bool,
        Vec<u64>,
        &str,
        DType,
        Option<AvgMode>,
    ) = match op {
        WindowKernel::Im2col { cols, x } => (
            x,
            Some(x),
            false,
            vec![base_ptr(cols), base_ptr(x)],
            "im2col",
            x.dtype,
            None,
        ),
        WindowKernel::Col2im { x, cols } => (
            x,
            None,
            true,
            vec![base_ptr(x), base_ptr(cols)],
            "col2im",
            x.dtype,
            None,
        ),
        WindowKernel::MaxPool { values, indices, x } => (
            x,
            Some(x),
            false,
            vec![base_ptr(values), base_ptr(indices), base_ptr(x)],
            "max_pool",
            x.dtype,
            None,
        ),
        WindowKernel::AvgPool { out, x, mode } => (
            x,
            Some(x),
            false,
            vec![base_ptr(out), base_ptr(x)],
            "avg_pool",
            x.dtype,
            Some(mode),
        ),
        WindowKernel::AvgPoolBackward { dx, dy, mode } => (
            dx,
            None,
            true,
            vec![base_ptr(dx), base_ptr(dy)],
            "avg_pool_backward",
            dx.dtype,
            Some(mode),
        ),
        WindowKernel::MaxPoolBackward { dx, dy, indices } => (
            dx,
            None,
            true,
            vec![base_ptr(dx), base_ptr(dy), base_ptr(indices)],
            "max_pool_backward",
            dx.dtype,
            None,
        ),
    };
    let (n, c) = (planes_of.layout.shape[0], planes_of.layout.shape[1]);
    let wide = meta(windows, n, c, strided, mode);
    let narrow = wide.narrow(strided);
    let idx = if narrow.is_some() { "int" } else { "i64" };
    let f = if name == "im2col" {
        let es = dtype.size();
        let key = format!("windows:im2col:{es}:{idx}");
        super::nvrtc::functions(dev, &key, || im2col_source(es, idx), &["im2col"])?[0]
    } else {
        let key = format!("windows:typed:{}:{idx}", tag(dtype));
        let names = [
            "col2im",
            "max_pool",
            "avg_pool",
            "avg_pool_backward",
            "max_pool_backward",
        ];
        let fs = super::nvrtc::functions(
            dev,
            &key,
            || typed_source(dtype, lowest_literal(dtype), idx),
            &names,
        )?;
        fs[names.iter().position(|&k| k == name).unwrap_or(0)]
    };
    let g = grid(if per_input { wide.ln } else { wide.on }, wide.planes);
    let stream = dev.stream();
    // SAFETY: parameters match the kernel `name` (its operands' base
    // pointers in its order, then `WMeta` with `I` = i32 or i64 as compiled):
    // the outputs and the adjoints' inputs are contiguous with the sizes
    // the metadata describes, the strided input is read only at
    // coordinates inside its shape through its own strides, and with i32
    // metadata every value the kernel forms fits (`WMeta::narrow`).
    unsafe {
        let (a, b, c) = (
            KArg::of(&ptrs[0]),
            KArg::of(&ptrs[1]),
            ptrs.get(2).map(KArg::of),
        );
        let block = (NT, 1, 1);
        match (narrow, c) {
            (Some(m), None) => launch(dev, name, f, g, block, stream, [a, b, KArg::of(&m)]),
            (Some(m), Some(c)) => launch(dev, name, f, g, block, stream, [a, b, c, KArg::of(&m)]),
            (None, None) => launch(dev, name, f, g, block, stream, [a, b, KArg::of(&wide)]),
            (None, Some(c)) => launch(dev, name, f, g, block, stream, [a, b, c, KArg::of(&wide)]),
        }
    }
}
