//! Host side of the element-wise kernels: builds the iteration plan, picks
//! the kernel (contiguous, rows, general, tiled), packs the metadata into a
//! by-value kernel argument and launches on the current stream.

use super::context::{cu, cu_stream, failure, guarded, CudaDevice, Function};
use super::kernels::elementwise::{self as ew, tile_geometry, BLOCK, UNROLL};
use super::kernels::{storage_ty, tag, MAXD};
use crate::backend::Arg;
use crate::error::Result;
use crate::iter_plan::IterPlan;
use cudarc::driver::sys;
use std::ffi::c_void;
use std::marker::PhantomData;
use strata_alloc::StreamId;

/// Kernel metadata, laid out as `Meta` in the source: dims fastest first,
/// byte strides per operand (0 = output).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct Meta {
    pub nd: i32,
    pub tile: i32,
    pub outer: i64,
    pub size: [i64; MAXD],
    pub st: [[i64; MAXD]; 4],
}

/// Scalar parameters, laid out as `Params` in the source.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Params {
    pub f0: f64,
    pub f1: f64,
    pub i0: i64,
    pub i1: i64,
    pub bits: u64,
    pub has0: i32,
    pub has1: i32,
}

/// A plan over any number (1 to 4) of operands.
pub(crate) struct Plan {
    pub shape: Vec<usize>,
    pub strides: Vec<Vec<isize>>,
    pub tile_dim: Option<usize>,
}

fn from_plan<const N: usize>(p: IterPlan<N>) -> Plan {
    Plan {
        strides: p.strides.iter().map(|s| s.to_vec()).collect(),
        shape: p.shape,
        tile_dim: p.tile_dim,
    }
}

/// The iteration plan of `args` (output first).
pub(crate) fn plan(args: &[&Arg]) -> Plan {
    let shape = &args[0].layout.shape;
    let st = |i: usize| args[i].layout.strides.as_slice();
    let es = |i: usize| args[i].dtype.size();
    match args.len() {
        1 => from_plan(IterPlan::<1>::new(shape, [st(0)], [es(0)])),
        2 => from_plan(IterPlan::<2>::new(shape, [st(0), st(1)], [es(0), es(1)])),
        3 => from_plan(IterPlan::<3>::new(
            shape,
            [st(0), st(1), st(2)],
            [es(0), es(1), es(2)],
        )),
        _ => from_plan(IterPlan::<4>::new(
            shape,
            [st(0), st(1), st(2), st(3)],
            [es(0), es(1), es(2), es(3)],
        )),
    }
}

/// A launch's grid or block extent.
type Dim3 = (u32, u32, u32);

/// The grid and block of the vectorised transpose `tiled_v` over dims 0 and
/// `k` of `m`, or `None` where its layout conditions fail: the output and
/// the direct inputs step one element along dim 0, the transposed inputs one
/// element along `k` (none broadcast); every base address and every other
/// stride is a multiple of a vector (`v` elements); both dims are multiples
/// of `v`; the grid fits the launch limits.
fn tiled_v_geometry(
    m: &Meta,
    k: usize,
    ptrs: &[u64],
    sizes: &[usize],
    v: u32,
) -> Option<(Dim3, Dim3)> {
    let nd = m.nd as usize;
    let (n0, nk) = (m.size[0], m.size[k]);
    let vi = v as i64;
    if v < 2 || n0 % vi != 0 || nk % vi != 0 {
        return None;
    }
    for (i, (&p, &sz)) in ptrs.iter().zip(sizes).enumerate() {
        let (e, unit) = (sz as i64, vi * sz as i64);
        let (s0, sk) = (m.st[i][0], m.st[i][k]);
        let direct = s0 == e && sk % unit == 0;
        let transposed = i > 0 && sk == e && s0 % unit == 0 && s0 != 0;
        let others = (1..nd).all(|d| d == k || m.st[i][d] % unit == 0);
        if !(direct || transposed) || !others || p % unit as u64 != 0 {
            return None;
        }
    }
    let edge = ew::tiled_v_edge(sizes) as i64;
    let (gx, gy, gz) = ((n0 + edge - 1) / edge, (nk + edge - 1) / edge, m.outer);
    if gx > i32::MAX as i64 || gy > 65535 || gz > 65535 {
        return None;
    }
    let (tx, ty) = ew::tiled_v_block(edge as u32, v);
    Some(((gx as u32, gy as u32, gz as u32), (tx, ty, 1)))
}

/// Address of an operand's first element.
pub(crate) fn base_ptr(a: &Arg) -> u64 {
    a.mem.ptr + (a.layout.offset * a.dtype.size()) as u64
}

/// A type whose values can be passed by value as a kernel parameter: plain
/// old data whose layout is the C parameter's.
///
/// # Safety
/// Implementors must be `#[repr(C)]` (or primitive) with no padding the
/// kernel would read and no pointers to host memory.
pub(crate) unsafe trait KernelParam: Copy {}

// SAFETY: primitives with the C layouts of `u64`/`char*`, `i64`, `int`.
unsafe impl KernelParam for u64 {}
// SAFETY: as above.
unsafe impl KernelParam for i64 {}
// SAFETY: as above.
unsafe impl KernelParam for i32 {}
// SAFETY: primitives with the C layouts of `double` and `float`.
unsafe impl KernelParam for f64 {}
// SAFETY: as above.
unsafe impl KernelParam for f32 {}
// SAFETY: `#[repr(C)]`, laid out as `Meta` in the kernels' source.
unsafe impl KernelParam for Meta {}
// SAFETY: `#[repr(C)]`, laid out as `Params` in the kernels' source.
unsafe impl KernelParam for Params {}

/// One kernel argument: the address of a value that outlives the launch.
#[derive(Clone, Copy)]
pub(crate) struct KArg<'a>(*mut c_void, PhantomData<&'a ()>);

impl<'a> KArg<'a> {
    /// The argument `v` (the driver copies it when the launch is queued).
    pub(crate) fn of<T: KernelParam>(v: &'a T) -> KArg<'a> {
        KArg(v as *const T as *mut c_void, PhantomData)
    }
}

/// Launches `f` on `stream` with `args`, in the kernel's parameter order.
///
/// # Safety
/// `args` must match the kernel's parameters in number, order and type, and
/// every address the kernel derives from them must lie in live device memory
/// of this device.
pub(crate) unsafe fn launch<const N: usize>(
    dev: &CudaDevice,
    what: &str,
    f: Function,
    grid: (u32, u32, u32),
    block: (u32, u32, u32),
    stream: StreamId,
    args: [KArg<'_>; N],
) -> Result<()> {
    let mut params: [*mut c_void; N] = args.map(|a| a.0);
    let device = dev.device();
    dev.bind()?;
    guarded(device, what, || {
        // SAFETY: the caller guarantees the arguments (each pointer addresses a
        // live value of the parameter's type, borrowed for this call); `f` is a
        // loaded kernel of this device, whose context is current; the stream is
        // the legacy default stream or a live stream of this context. The
        // driver only reads through the parameter pointers.
        let r = unsafe {
            sys::cuLaunchKernel(
                f.0,
                grid.0,
                grid.1,
                grid.2,
                block.0,
                block.1,
                block.2,
                0,
                cu_stream(stream),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        cu(device, "cuLaunchKernel", r)
            .map_err(|e| failure(device, format!("launch {what}"), e.to_string()))
    })
}

/// A kernel key formatted without a heap allocation (on the stack; a key
/// longer than the buffer spills to a `String`), so that finding a compiled
/// kernel costs no allocation per launch.
pub(crate) struct Key {
    buf: [u8; 120],
    len: usize,
    spill: Option<String>,
}

impl Key {
    /// An empty key.
    pub(crate) fn new() -> Key {
        Key {
            buf: [0; 120],
            len: 0,
            spill: None,
        }
    }

    /// The key's text.
    pub(crate) fn as_str(&self) -> &str {
        match &self.spill {
            Some(s) => s,
            // Only whole `&str`s are ever copied in, so this is UTF-8.
            None => std::str::from_utf8(&self.buf[..self.len]).unwrap_or(""),
        }
    }
}

impl std::fmt::Write for Key {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if let Some(sp) = &mut self.spill {
            sp.push_str(s);
        } else if self.len + s.len() <= self.buf.len() {
            self.buf[self.len..self.len + s.len()].copy_from_slice(s.as_bytes());
            self.len += s.len();
        } else {
            let mut sp = String::with_capacity(2 * (self.len + s.len()));
            sp.push_str(self.as_str());
            sp.push_str(s);
            self.spill = Some(sp);
        }
        Ok(())
    }
}

/// Runs the element-wise op `name` whose body `body` generates: `out` is the
/// output, `ins` the inputs (up to three, strides broadcast to out's shape).
///
/// The host path is kept short for small ops: the kernel is found by a key
/// formatted on the stack (`name` may be `format_args!`), operands that are
/// all contiguous skip the iteration plan, and nothing is allocated.
pub(crate) fn elementwise(
    dev: &CudaDevice,
    name: impl std::fmt::Display,
    body: impl FnOnce() -> String,
    out: &Arg,
    ins: &[&Arg],
    prm: Params,
) -> Result<()> {
    use std::fmt::Write as _;
    let n = out.layout.numel();
    if n == 0 {
        return Ok(());
    }
    let nargs = ins.len() + 1;
    if nargs > 4 {
        return Err(failure(
            dev.device(),
            format!("launch {name}"),
            format!("{} inputs exceed the kernels' limit of 3", ins.len()),
        ));
    }
    let mut slots: [&Arg; 4] = [out; 4];
    slots[1..nargs].copy_from_slice(ins);
    let args = &slots[..nargs];
    let nin = ins.len();
    let mut tys = ["u8"; 4];
    let mut sizes = [1usize; 4];
    for (i, a) in args.iter().enumerate() {
        tys[i] = storage_ty(a.dtype);
        sizes[i] = a.dtype.size();
    }
    let widest = sizes[..=nin].iter().copied().max().unwrap_or(1);
    let v = (16 / widest).max(1) as u32;
    let (td, tr) = tile_geometry();
    let mut key = Key::new();
    let _ = write!(key, "ew:{name}:");
    for (i, a) in args.iter().enumerate() {
        let _ = write!(key, "{}{}", if i > 0 { "," } else { "" }, tag(a.dtype));
    }
    let _ = write!(key, ":t{td}x{tr}");
    let what = key.as_str();
    let funcs = super::nvrtc::functions(
        dev,
        what,
        || ew::source(tys, nin, v, &body(), &sizes[..=nin]),
        &ew::NAMES,
    )?;
    let mut ptrs = [0u64; 4];
    for (i, a) in args.iter().enumerate() {
        ptrs[i] = base_ptr(a);
    }
    let stream = dev.stream();
    // Every operand one contiguous run (the common case of small ops): no
    // plan needed.
    if args.iter().all(|a| a.layout.is_contiguous()) {
        return launch_contiguous(dev, what, &funcs, nargs, &ptrs, &sizes, v, n, prm, stream);
    }
    let p = plan(args);
    if p.shape.len() > MAXD {
        return launch_peeled(dev, what, &funcs, nargs, &ptrs, &sizes, v, prm, stream, &p);
    }
    launch_planned(
        dev,
        what,
        &funcs,
        nargs,
        &ptrs,
        &sizes,
        v,
        prm,
        stream,
        (&p.shape, &p.strides, p.tile_dim),
    )
}

/// The dims of a plan of `shape` (fastest first) that a launch walks and
/// those the host loops over, so that at most `max` are walked: the
/// `shape.len() - max` smallest dims but dim 0 (kept for coalesced
/// accesses) are looped over, the fewest launches for the dims left out.
/// Returns `(walked, looped)`, each in increasing order.
pub(crate) fn split_dims(shape: &[usize], max: usize) -> (Vec<usize>, Vec<usize>) {
    split_dims_among(shape, (0..shape.len()).collect(), 0, max)
}

/// [`split_dims`] over the dims `live` of `shape` (increasing), `keep`
/// (one of them, or outside them) always walked.
pub(crate) fn split_dims_among(
    shape: &[usize],
    live: Vec<usize>,
    keep: usize,
    max: usize,
) -> (Vec<usize>, Vec<usize>) {
    if live.len() <= max {
        return (live, Vec::new());
    }
    let mut by_size: Vec<usize> = live.iter().copied().filter(|&d| d != keep).collect();
    by_size.sort_by_key(|&d| shape[d]);
    let mut looped: Vec<usize> = by_size[..live.len() - max.max(1)].to_vec();
    looped.sort_unstable();
    let walked = live.into_iter().filter(|d| !looped.contains(d)).collect();
    (walked, looped)
}

/// A plan of more than `MAXD` dims (PyTorch's kernels take up to 25; any
/// number works here): the smallest dims but the fastest are looped over
/// on the host (`split_dims`), each position a launch of the other `MAXD`
/// dims from its operands' addresses there.
#[allow(clippy::too_many_arguments)]
fn launch_peeled(
    dev: &CudaDevice,
    what: &str,
    funcs: &[Function],
    nargs: usize,
    ptrs: &[u64; 4],
    sizes: &[usize; 4],
    v: u32,
    prm: Params,
    stream: StreamId,
    p: &Plan,
) -> Result<()> {
    let (walked, looped) = split_dims(&p.shape, MAXD);
    let shape: Vec<usize> = walked.iter().map(|&d| p.shape[d]).collect();
    let strides: Vec<Vec<isize>> = walked.iter().map(|&d| p.strides[d].clone()).collect();
    for off in looped_offsets(&p.shape, &p.strides, &looped, nargs) {
        let mut sub = *ptrs;
        for (q, &o) in sub.iter_mut().zip(&off).take(nargs) {
            *q = q.wrapping_add_signed(o);
        }
        launch_planned(
            dev,
            what,
            funcs,
            nargs,
            &sub,
            sizes,
            v,
            prm,
            stream,
            (&shape, &strides, None),
        )?;
    }
    Ok(())
}

/// The byte offsets of each of `nargs` operands at every position of the
/// `looped` dims of a plan (`shape`, byte `strides[dim][operand]`), the
/// first looped dim fastest.
pub(crate) fn looped_offsets(
    shape: &[usize],
    strides: &[Vec<isize>],
    looped: &[usize],
    nargs: usize,
) -> Vec<[i64; 4]> {
    let count: usize = looped.iter().map(|&d| shape[d]).product();
    let mut out = Vec::with_capacity(count);
    let mut idx = vec![0usize; looped.len()];
    loop {
        let mut off = [0i64; 4];
        for (j, &d) in looped.iter().enumerate() {
            for (i, o) in off.iter_mut().enumerate().take(nargs) {
                // idx < size, and a byte stride along a dim of size > 1
                // stays inside its operand's storage, so this fits.
                *o += idx[j] as i64 * strides[d][i] as i64;
            }
        }
        out.push(off);
        // The next position (an odometer).
        let mut j = 0;
        loop {
            if j == idx.len() {
                return out;
            }
            idx[j] += 1;
            if idx[j] < shape[looped[j]] {
                break;
            }
            idx[j] = 0;
            j += 1;
        }
    }
}

/// Blocks along a grid's x dimension: `None` past its limit of 2^31 - 1.
pub(crate) fn grid_x(blocks: u64) -> Option<u32> {
    u32::try_from(blocks).ok().filter(|&b| b <= i32::MAX as u32)
}

/// Launches the strided kernels over a plan of at most `MAXD` dims (sizes,
/// byte strides `[dim][operand]`, tile dim) from the operands' first
/// elements `ptrs`.
#[allow(clippy::too_many_arguments)]
fn launch_planned(
    dev: &CudaDevice,
    what: &str,
    funcs: &[Function],
    nargs: usize,
    ptrs: &[u64; 4],
    sizes: &[usize; 4],
    v: u32,
    prm: Params,
    stream: StreamId,
    (shape, strides, tile_dim): (&[usize], &[Vec<isize>], Option<usize>),
) -> Result<()> {
    let nd = shape.len();
    let n: usize = shape.iter().product();
    if n == 0 {
        return Ok(());
    }
    let [p0, p1, p2, p3] = *ptrs;
    let mut meta = Meta {
        nd: nd as i32,
        tile: 0,
        outer: 1,
        size: [1; MAXD],
        st: [[0; MAXD]; 4],
    };
    for (d, (&size, st)) in shape.iter().zip(strides).enumerate() {
        meta.size[d] = size as i64;
        for (i, &s) in st.iter().enumerate().take(nargs) {
            meta.st[i][d] = s as i64;
        }
    }
    let contiguous = nd <= 1 && (0..nargs).all(|i| nd == 0 || meta.st[i][0] == sizes[i] as i64);
    if contiguous {
        return launch_contiguous(dev, what, funcs, nargs, ptrs, sizes, v, n, prm, stream);
    }
    let n0 = shape[0];
    if let Some(k) = tile_dim.filter(|&k| shape[k] > 1 && n0 > 1) {
        meta.tile = k as i32;
        meta.outer = (1..nd)
            .filter(|&d| d != k)
            .map(|d| shape[d] as i64)
            .product();
        // Both tile kernels take (char*, const char* x3, Meta, Params).
        let kargs = [
            KArg::of(&p0),
            KArg::of(&p1),
            KArg::of(&p2),
            KArg::of(&p3),
            KArg::of(&meta),
            KArg::of(&prm),
        ];
        if let Some((grid, block)) = tiled_v_geometry(&meta, k, &ptrs[..nargs], &sizes[..nargs], v)
        {
            // SAFETY: the parameters match `tiled_v(char*, const char* x3,
            // Meta, Params)`; the plan's sizes and byte strides describe each
            // operand's own layout, and `tiled_v_geometry` checked that every
            // vector access is aligned and lies within dims 0 and k (n0 and
            // nk are multiples of the vector width), so every address lies
            // inside its storage.
            return unsafe { launch(dev, what, funcs[8], grid, block, stream, kargs) };
        }
        let (td, tr) = tile_geometry();
        let tiles = (n0 as u64).div_ceil(td as u64)
            * (shape[k] as u64).div_ceil(td as u64)
            * meta.outer as u64;
        let grid = tiles.min(i32::MAX as u64) as u32;
        // SAFETY: the parameters match `tiled(char*, const char* x3, Meta,
        // Params)`; the plan's sizes and byte strides describe each operand's
        // own layout, so every address computed lies inside its storage.
        return unsafe {
            launch(
                dev,
                what,
                funcs[5],
                (grid, 1, 1),
                (32, tr, 1),
                stream,
                kargs,
            )
        };
    }
    let vec_ok = v > 1
        && n0.is_multiple_of(v as usize)
        && (0..nargs).all(|i| {
            let s0 = meta.st[i][0];
            let unit = v as i64 * sizes[i] as i64;
            (s0 == 0 && i > 0)
                || (s0 == sizes[i] as i64
                    && ptrs[i].is_multiple_of(unit as u64)
                    && (1..nd).all(|d| meta.st[i][d] % unit == 0))
        });
    let w = if vec_ok { v } else { 1 };
    let row_vectors = n0.div_ceil(w as usize);
    if n0 >= 4 && nd > 1 && row_vectors <= (BLOCK / 2) as usize {
        // Rows shorter than half a block: several rows per block.
        let tpr = row_vectors.next_power_of_two() as u32;
        meta.tile = tpr as i32;
        meta.outer = (1..nd).map(|d| shape[d] as i64).product();
        let per_block = (BLOCK / tpr) as u64 * UNROLL as u64;
        let grid = (meta.outer as u64).div_ceil(per_block).min(i32::MAX as u64) as u32;
        let f = if vec_ok { funcs[6] } else { funcs[7] };
        let kargs = [
            KArg::of(&p0),
            KArg::of(&p1),
            KArg::of(&p2),
            KArg::of(&p3),
            KArg::of(&meta),
            KArg::of(&prm),
        ];
        // SAFETY: the parameters match `rowsp_*(char*, const char* x3, Meta,
        // Params)`; addresses come from each operand's own sizes and strides;
        // the vector kernel is taken only when every access it makes is aligned.
        return unsafe { launch(dev, what, f, (grid, 1, 1), (BLOCK, 1, 1), stream, kargs) };
    }
    if n0 >= 64 {
        meta.outer = (1..nd).map(|d| shape[d] as i64).product();
        let f = if vec_ok { funcs[2] } else { funcs[3] };
        let gx = grid_x((n0 as u64).div_ceil((BLOCK * UNROLL * w) as u64)).ok_or_else(|| {
            failure(
                dev.device(),
                format!("launch {what}"),
                format!("a dim of {n0} elements is too long for one launch"),
            )
        })?;
        let gy = meta.outer.clamp(1, 65535) as u32;
        let kargs = [
            KArg::of(&p0),
            KArg::of(&p1),
            KArg::of(&p2),
            KArg::of(&p3),
            KArg::of(&meta),
            KArg::of(&prm),
        ];
        // SAFETY: the parameters match `rows_*(char*, const char* x3, Meta,
        // Params)`; addresses come from each operand's own sizes and strides;
        // the vector path is taken only when every access it makes is aligned.
        return unsafe { launch(dev, what, f, (gx, gy, 1), (BLOCK, 1, 1), stream, kargs) };
    }
    let n64 = n as i64;
    let blocks = (n as u64)
        .div_ceil(BLOCK as u64)
        .min(dev.sm_count as u64 * 16)
        .max(1) as u32;
    let kargs = [
        KArg::of(&p0),
        KArg::of(&p1),
        KArg::of(&p2),
        KArg::of(&p3),
        KArg::of(&meta),
        KArg::of(&n64),
        KArg::of(&prm),
    ];
    // SAFETY: the parameters match `general(char*, const char* x3, Meta, i64,
    // Params)`; addresses come from each operand's own sizes and strides.
    unsafe {
        launch(
            dev,
            what,
            funcs[4],
            (blocks, 1, 1),
            (BLOCK, 1, 1),
            stream,
            kargs,
        )
    }
}

/// Launches the contiguous kernel of `funcs` (`contig_v` where every base
/// pointer is aligned to its vector, else `contig_1`) over `n` elements.
#[allow(clippy::too_many_arguments)]
fn launch_contiguous(
    dev: &CudaDevice,
    what: &str,
    funcs: &[Function],
    nargs: usize,
    ptrs: &[u64; 4],
    sizes: &[usize; 4],
    v: u32,
    n: usize,
    prm: Params,
    stream: StreamId,
) -> Result<()> {
    let n64 = n as i64;
    let aligned = (0..nargs).all(|i| ptrs[i].is_multiple_of(v as u64 * sizes[i] as u64));
    let (f, w) = if aligned && v > 1 {
        (funcs[0], v)
    } else {
        (funcs[1], 1)
    };
    let span = (BLOCK * UNROLL * w) as u64;
    let grid = grid_x((n as u64).div_ceil(span)).ok_or_else(|| {
        failure(
            dev.device(),
            format!("launch {what}"),
            format!("{n} elements are too many for one launch"),
        )
    })?;
    let [p0, p1, p2, p3] = *ptrs;
    let kargs = [
        KArg::of(&p0),
        KArg::of(&p1),
        KArg::of(&p2),
        KArg::of(&p3),
        KArg::of(&n64),
        KArg::of(&prm),
    ];
    // SAFETY: the parameters match `contig_*(char*, const char*, const
    // char*, const char*, i64, Params)`; every operand is contiguous with n
    // elements from its base pointer inside its storage (the caller's layouts
    // are checked against their storages), and unused inputs are never read.
    unsafe { launch(dev, what, f, (grid, 1, 1), (BLOCK, 1, 1), stream, kargs) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The grid's x dimension takes at most 2^31 - 1 blocks (CUDA's
    /// `maxGridSize[0]`); a u32 above it would be an invalid launch.
    #[test]
    fn grid_x_stops_at_the_launch_limit() {
        assert_eq!(grid_x(1), Some(1));
        assert_eq!(grid_x(0x7fff_ffff), Some(0x7fff_ffff));
        assert_eq!(grid_x(0x8000_0000), None);
        assert_eq!(grid_x(u32::MAX as u64), None);
        assert_eq!(grid_x(1 << 40), None);
    }

    /// The looped positions times the walked dims visit every element of a
    /// plan of more than `MAXD` dims exactly once, at its own byte offset in
    /// every operand (the host side of `launch_peeled`; the walked dims are
    /// enumerated here as the kernels do).
    #[test]
    fn peeled_launches_cover_every_element_once() {
        use crate::iter_plan::IterPlan;
        // 15 dims, the input's reversed (nothing coalesces), a broadcast dim.
        let shape: Vec<usize> = vec![2, 3, 2, 2, 5, 2, 2, 3, 2, 2, 2, 4, 2, 2, 3];
        let nd = shape.len();
        let out_st = crate::layout::Layout::contiguous(&shape).strides;
        let rev: Vec<usize> = (0..nd).rev().map(|d| shape[d]).collect();
        let rev_st = crate::layout::Layout::contiguous(&rev).strides;
        let mut in_st: Vec<usize> = (0..nd).map(|d| rev_st[nd - 1 - d]).collect();
        in_st[4] = 0;
        let p = IterPlan::<2>::new(&shape, [&out_st, &in_st], [4, 2]);
        assert!(
            p.shape.len() > MAXD,
            "the plan keeps {} dims",
            p.shape.len()
        );
        let strides: Vec<Vec<isize>> = p.strides.iter().map(|s| s.to_vec()).collect();
        let all = |dims: &[usize]| -> Vec<[i64; 2]> {
            let mut v = vec![[0i64; 2]];
            for &d in dims {
                let mut next = Vec::with_capacity(v.len() * p.shape[d]);
                for c in 0..p.shape[d] as i64 {
                    for o in &v {
                        next.push([
                            o[0] + c * strides[d][0] as i64,
                            o[1] + c * strides[d][1] as i64,
                        ]);
                    }
                }
                v = next;
            }
            v
        };
        let mut want = all(&(0..p.shape.len()).collect::<Vec<_>>());
        let (walked, looped) = split_dims(&p.shape, MAXD);
        assert_eq!(walked.len(), MAXD);
        let inner = all(&walked);
        let mut got = Vec::new();
        for off in looped_offsets(&p.shape, &strides, &looped, 2) {
            got.extend(inner.iter().map(|o| [o[0] + off[0], o[1] + off[1]]));
        }
        assert_eq!(got.len(), shape.iter().product::<usize>());
        want.sort_unstable();
        got.sort_unstable();
        assert_eq!(got, want);
        // Each output byte offset once: every element written once.
        let mut outs: Vec<i64> = got.iter().map(|o| o[0]).collect();
        outs.dedup();
        assert_eq!(outs.len(), got.len());
    }

    /// At most `max` dims are walked, dim 0 always among them, and the
    /// looped dims are the smallest others (fewest launches).
    #[test]
    fn split_dims_loops_over_the_smallest_dims_but_the_fastest() {
        let shape = [2, 3, 2, 5, 2, 7, 2, 3, 2, 4, 2, 9, 2, 6, 11];
        let (walked, looped) = split_dims(&shape, MAXD);
        assert_eq!(walked.len(), MAXD);
        assert_eq!(looped.len(), shape.len() - MAXD);
        assert!(walked.contains(&0));
        let mut all: Vec<usize> = walked.iter().chain(&looped).copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..shape.len()).collect::<Vec<_>>());
        // Every looped dim is no larger than any walked dim but dim 0.
        let max_looped = looped.iter().map(|&d| shape[d]).max().unwrap();
        assert!(walked[1..].iter().all(|&d| shape[d] >= max_looped));
        assert_eq!(max_looped, 2);
        assert!(walked.windows(2).all(|w| w[0] < w[1]));
        assert!(looped.windows(2).all(|w| w[0] < w[1]));
        // A small dim 0 is still walked.
        let (walked, looped) = split_dims(&[2; 14], MAXD);
        assert_eq!(walked[0], 0);
        assert_eq!(looped.len(), 2);
        // Within the limit nothing is looped.
        assert_eq!(split_dims(&[5; MAXD], MAXD), ((0..MAXD).collect(), vec![]));
        assert_eq!(split_dims(&[], MAXD), (vec![], vec![]));
    }
}
