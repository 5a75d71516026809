//! The CPU kernel of [`NnKernel::MapCopy`](crate::backend::NnKernel::MapCopy)
//! (flip, roll, repeat, pad; `ops/shape_ops.rs`): one pass over the output
//! by rows of its last dim, parallel over rows (rayon). Each row's source
//! offset along the other dims is computed once; along the row the source
//! offsets come from a table (rows up to [`TABLE_MAX`] elements), or from
//! the map itself, with a plain copy where the row is an identity between
//! two unit strides. Elements are moved as bits (1, 2, 4 or 8 bytes).

use super::nn::Ptr;
use crate::backend::Arg;
use crate::ops::DimMap;
use rayon::prelude::*;

/// Output elements per parallel task.
const CHUNK: usize = 1 << 15;
/// Rows up to this length take their source offsets from a table.
const TABLE_MAX: usize = 1 << 16;

/// Runs the copy (see `NnKernel::MapCopy`).
pub(crate) fn map_copy(out: &Arg, src: &Arg, maps: &[DimMap], fill: u64) {
    match out.dtype.size() {
        1 => run::<u8>(out, src, maps, fill as u8),
        2 => run::<u16>(out, src, maps, fill as u16),
        4 => run::<u32>(out, src, maps, fill as u32),
        _ => run::<u64>(out, src, maps, fill),
    }
}

fn base<T>(a: &Arg) -> Ptr<T> {
    // SAFETY: the offset lies inside the storage (layouts are checked when
    // views are made), so the pointer stays within the allocation.
    Ptr(unsafe { (a.mem.host_ptr() as *mut T).add(a.layout.offset) })
}

fn run<T: Copy + Send + Sync>(out: &Arg, src: &Arg, maps: &[DimMap], fill: T) {
    let shape = &out.layout.shape;
    let n: usize = shape.iter().product();
    if n == 0 {
        return;
    }
    let (po, ps) = (base::<T>(out), base::<T>(src));
    let nd = shape.len();
    if nd == 0 {
        // SAFETY: a 0-d output and source hold one element each.
        unsafe { *po.get() = *ps.get() };
        return;
    }
    let last = nd - 1;
    let inner = shape[last];
    let (so, ss) = (&out.layout.strides, &src.layout.strides);
    let src_n: Vec<i64> = src.layout.shape.iter().map(|&s| s as i64).collect();
    let (os_in, ss_in) = (so[last], ss[last] as i64);
    let map_in = maps[last];
    // Source offsets along the row (-1: the padding value).
    let table: Option<Vec<i64>> = (inner <= TABLE_MAX).then(|| {
        (0..inner as i64)
            .map(|o| map_in.source(o, src_n[last]).map_or(-1, |s| s * ss_in))
            .collect()
    });
    let plain = map_in == DimMap::Id && os_in == 1 && ss_in == 1;
    let rows = n / inner;
    let per_task = (CHUNK / inner).max(1);
    let starts: Vec<usize> = (0..rows).step_by(per_task).collect();
    starts.par_iter().for_each(|&r0| {
        for r in r0..(r0 + per_task).min(rows) {
            // The row's offsets along the outer dims.
            let (mut oo, mut sb, mut ok) = (0usize, 0i64, true);
            let mut rest = r;
            for d in (0..last).rev() {
                let c = rest % shape[d];
                rest /= shape[d];
                oo += c * so[d];
                match maps[d].source(c as i64, src_n[d]) {
                    Some(s) => sb += s * ss[d] as i64,
                    None => ok = false,
                }
            }
            // SAFETY: `oo + j * os_in` addresses out's element at the row's
            // coordinates (inside out's shape); source offsets are built
            // from coordinates that `DimMap::source` keeps inside src's
            // shape, so every read is an element of src. Rows are disjoint
            // between tasks and out has no internal overlap.
            unsafe {
                let o = po.get().add(oo);
                if !ok {
                    for j in 0..inner {
                        *o.add(j * os_in) = fill;
                    }
                    continue;
                }
                let s = ps.get().offset(sb as isize);
                if plain {
                    std::ptr::copy_nonoverlapping(s, o, inner);
                    continue;
                }
                match &table {
                    Some(t) => {
                        for (j, &k) in t.iter().enumerate() {
                            *o.add(j * os_in) = if k < 0 { fill } else { *s.offset(k as isize) };
                        }
                    }
                    None => {
                        for j in 0..inner {
                            *o.add(j * os_in) = match map_in.source(j as i64, src_n[last]) {
                                Some(k) => *s.offset((k * ss_in) as isize),
                                None => fill,
                            };
                        }
                    }
                }
            }
        }
    });
}
