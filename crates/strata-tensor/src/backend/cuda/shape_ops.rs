//! The CUDA kernel of [`NnKernel::MapCopy`](crate::backend::NnKernel::MapCopy)
//! (flip, roll, repeat, pad; `ops/shape_ops.rs`): a grid-stride loop over
//! the output's elements in 64-bit arithmetic; each thread splits its
//! position into coordinates, maps each to the source's (the same
//! arithmetic as `DimMap::source`) and copies the element's bits, or writes
//! the padding value where a map names nothing. A source coordinate outside
//! the source's shape is never read (the kernel bounds every one). Output
//! dims of size 1 are folded into the base offsets; past [`MAXD`] dims the
//! host loops over the leading ones, one launch per position.

use super::context::CudaDevice;
use super::kernels::{MAXD, PRELUDE};
use super::launch::{base_ptr, launch, KArg, KernelParam};
use crate::backend::Arg;
use crate::error::Result;
use crate::ops::DimMap;

/// Threads per block.
const NT: u32 = 256;

/// The kernel's metadata, laid out as `MMeta` in the source (all i64: no
/// padding). `kind`, `a`, `w`, `b` are [`DimMap::encode`]'s.
#[repr(C)]
#[derive(Clone, Copy)]
struct MMeta {
    nd: i64,
    n: i64,
    all_fill: i64,
    size: [i64; MAXD],
    so: [i64; MAXD],
    ss: [i64; MAXD],
    sn: [i64; MAXD],
    kind: [i64; MAXD],
    a: [i64; MAXD],
    w: [i64; MAXD],
    b: [i64; MAXD],
}

// SAFETY: `#[repr(C)]`, i64s only (no padding), laid out as `MMeta` in the
// source; no pointers.
unsafe impl KernelParam for MMeta {}

fn source(esize: usize) -> String {
    let e = match esize {
        1 => "u8",
        2 => "u16",
        4 => "u32",
        _ => "u64",
    };
    format!(
        "{PRELUDE}typedef {e} E;\n{body}",
        body = r#"
struct MMeta { i64 nd; i64 n; i64 all_fill; i64 size[MAXD]; i64 so[MAXD]; i64 ss[MAXD]; i64 sn[MAXD];
               i64 kind[MAXD]; i64 a[MAXD]; i64 w[MAXD]; i64 b[MAXD]; };
// DimMap::source: the source coordinate of output coordinate o along a dim
// of source size n (any value outside [0, n) means the padding value).
__device__ __forceinline__ i64 src_coord(i64 k, i64 o, i64 n, i64 a, i64 w, i64 b) {
  switch (k) {
    case 0: return o;
    case 1: return n - 1 - o;
    case 2: { if (w <= 0) return -1; i64 m = (o - a) % w; if (m < 0) m += w; return m + b; }
    case 3: return a > 0 ? o / a : -1;
    case 4: return o - a;
    case 5: { i64 i = o - a; if (i < 0) i = -i; else if (i >= n) i = 2 * (n - 1) - i; return i; }
    case 6: { if (n <= 0) return -1; i64 i = o - a; return i < 0 ? 0 : (i > n - 1 ? n - 1 : i); }
  }
  return -1;
}
extern "C" __global__ void map_copy(E* out, const E* src, MMeta m, u64 fill) {
  const E f = (E)fill;
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < m.n; i += (i64)gridDim.x * blockDim.x) {
    i64 r = i, oo = 0, os = 0;
    bool ok = m.all_fill == 0;
    for (int d = (int)m.nd - 1; d >= 0; --d) {
      const i64 c = r % m.size[d];
      r /= m.size[d];
      oo += c * m.so[d];
      const i64 s = src_coord(m.kind[d], c, m.sn[d], m.a[d], m.w[d], m.b[d]);
      if (s < 0 || s >= m.sn[d]) ok = false; else os += s * m.ss[d];
    }
    out[oo] = ok ? src[os] : f;
  }
}
"#
    )
}

/// Runs the copy on `dev`'s current stream (see `NnKernel::MapCopy`).
pub(crate) fn map_copy(
    dev: &CudaDevice,
    out: &Arg,
    src: &Arg,
    maps: &[DimMap],
    fill: u64,
) -> Result<()> {
    let (ol, sl) = (&out.layout, &src.layout);
    let n: usize = ol.shape.iter().product();
    if n == 0 {
        return Ok(());
    }
    let es = out.dtype.size();
    let key = format!("shape:map_copy:{es}");
    let f = super::nvrtc::functions(dev, &key, || source(es), &["map_copy"])?;
    // Output dims of size 1 fold into the source's base offset (or make the
    // whole output the padding value).
    let (mut sbase, mut all_fill) = (0i64, false);
    let mut dims = Vec::new();
    for (d, map) in maps.iter().enumerate() {
        if ol.shape[d] == 1 {
            match map.source(0, sl.shape[d] as i64) {
                Some(s) => sbase += s * sl.strides[d] as i64,
                None => all_fill = true,
            }
        } else {
            dims.push(d);
        }
    }
    let looped = dims.len().saturating_sub(MAXD);
    let (outer, walked) = dims.split_at(looped);
    let mut m = MMeta {
        nd: walked.len() as i64,
        n: walked.iter().map(|&d| ol.shape[d]).product::<usize>() as i64,
        all_fill: 0,
        size: [1; MAXD],
        so: [0; MAXD],
        ss: [0; MAXD],
        sn: [1; MAXD],
        kind: [0; MAXD],
        a: [0; MAXD],
        w: [0; MAXD],
        b: [0; MAXD],
    };
    for (j, &d) in walked.iter().enumerate() {
        let (k, a, w, b) = maps[d].encode();
        m.size[j] = ol.shape[d] as i64;
        m.so[j] = ol.strides[d] as i64;
        m.ss[j] = sl.strides[d] as i64;
        m.sn[j] = sl.shape[d] as i64;
        m.kind[j] = k;
        m.a[j] = a;
        m.w[j] = w;
        m.b[j] = b;
    }
    let blocks = (m.n as u64).div_ceil(u64::from(NT)).clamp(1, 1 << 20) as u32;
    let (po, ps) = (base_ptr(out), base_ptr(src));
    let stream = dev.stream();
    // One launch per position of the looped dims (one launch when none).
    let mut coord = vec![0usize; outer.len()];
    loop {
        let (mut oo, mut so, mut fill_all) = (0i64, sbase, all_fill);
        for (j, &d) in outer.iter().enumerate() {
            oo += coord[j] as i64 * ol.strides[d] as i64;
            match maps[d].source(coord[j] as i64, sl.shape[d] as i64) {
                Some(s) => so += s * sl.strides[d] as i64,
                None => fill_all = true,
            }
        }
        m.all_fill = i64::from(fill_all);
        // With every element the padding value the source is not read: its
        // base stays at the operand's first element.
        let so = if fill_all { 0 } else { so };
        let qo = po + (oo as u64) * es as u64;
        let qs = ps + (so as u64) * es as u64;
        // SAFETY: parameters match `map_copy` (out, src, MMeta, fill bits);
        // the metadata describes out's own layout over the walked dims from
        // its element at this position of the looped ones (inside out), and
        // the kernel reads src only at coordinates inside src's shape, from
        // its element at this position's (mapped, in-range) coordinates.
        unsafe {
            launch(
                dev,
                "map_copy",
                f[0],
                (blocks, 1, 1),
                (NT, 1, 1),
                stream,
                [KArg::of(&qo), KArg::of(&qs), KArg::of(&m), KArg::of(&fill)],
            )?;
        }
        // Next position of the looped dims (row-major).
        let mut j = outer.len();
        loop {
            if j == 0 {
                return Ok(());
            }
            j -= 1;
            coord[j] += 1;
            if coord[j] < ol.shape[outer[j]] {
                break;
            }
            coord[j] = 0;
        }
    }
}
