//! Host side of the fused optimizer steps (`kernels::optim`).

use super::context::CudaDevice;
use super::dimops::grid;
use super::kernels::optim::{source, LIST};
use super::kernels::tag;
use super::launch::{base_ptr, launch, KArg, KernelParam};
use crate::error::Result;
use crate::ops::{AdamItem, AdamStep};

/// Threads per block of `adam_step` and `adam_step_list`.
const BLOCK: u32 = 256;

/// The module's kernels, in the order `functions` returns them.
const NAMES: [&str; 2] = ["adam_step", "adam_step_list"];

/// Elements per thread of one `adam_step_list` block, in 16-byte vectors.
const VECTORS_PER_THREAD: usize = 4;

/// Most blocks one tensor's entry of the list may have; a larger tensor is
/// split into several entries (so block indices stay far inside `i32`).
const MAX_ENTRY_BLOCKS: usize = 1 << 12;

/// The by-value argument of `adam_step_list`, laid out as `AdamList` in the
/// source.
#[repr(C)]
#[derive(Clone, Copy)]
struct AdamList {
    p: [u64; LIST],
    g: [u64; LIST],
    m: [u64; LIST],
    v: [u64; LIST],
    x: [u64; LIST],
    n: [i64; LIST],
    first_block: [i32; LIST + 1],
    count: i32,
}

// SAFETY: `#[repr(C)]` with the field order and C types of the source's
// `AdamList` (pointers as u64, i64, int); the device addresses it carries are
// checked by the caller of `launch`.
unsafe impl KernelParam for AdamList {}

/// The hyper-parameters of one step, laid out as `AdamArgs` in the source
/// (the explicit `pad` is the C struct's trailing padding).
#[repr(C)]
#[derive(Clone, Copy)]
struct AdamArgs {
    decay: f64,
    one_b1: f64,
    b2: f64,
    one_b2: f64,
    c2_sqrt: f64,
    eps: f64,
    step_size: f64,
    decays: i32,
    maximize: i32,
    amsgrad: i32,
    pad: i32,
}

// SAFETY: `#[repr(C)]` with the field order and C types of the source's
// `AdamArgs` (seven doubles and three ints, then the padding to its 8-byte
// alignment as an explicit zeroed field); no pointers.
unsafe impl KernelParam for AdamArgs {}

impl AdamArgs {
    fn of(s: &AdamStep) -> Self {
        let h = &s.h;
        let (decay, step_size, c2_sqrt) = h.factors();
        AdamArgs {
            decay,
            one_b1: 1.0 - h.beta1,
            b2: h.beta2,
            one_b2: 1.0 - h.beta2,
            c2_sqrt,
            eps: h.eps,
            step_size,
            decays: i32::from(h.weight_decay != 0.0),
            maximize: i32::from(s.maximize),
            amsgrad: i32::from(s.amsgrad),
            pad: 0,
        }
    }
}

/// Fills and launches `adam_step_list` for every item (`p, g, m, v` and,
/// with AMSGrad, `max`; contiguous, one float dtype, written tensors
/// disjoint from all others), up to `LIST` entries per launch.
pub(crate) fn adam_step_list(dev: &CudaDevice, items: &[AdamItem<'_>], s: &AdamStep) -> Result<()> {
    let Some(first) = items.first() else {
        return Ok(());
    };
    let d = first.p.dtype;
    let key = format!("adam_step:{}", tag(d));
    let f = super::nvrtc::functions(dev, &key, || source(d), &NAMES)?;
    let chunk = BLOCK as usize * VECTORS_PER_THREAD * (16 / d.size());
    let args = AdamArgs::of(s);
    let chunk_arg = chunk as i64;
    let empty = AdamList {
        p: [0; LIST],
        g: [0; LIST],
        m: [0; LIST],
        v: [0; LIST],
        x: [0; LIST],
        n: [0; LIST],
        first_block: [0; LIST + 1],
        count: 0,
    };
    let mut list = empty;
    let mut blocks = 0usize;
    let flush = |list: &AdamList, blocks: usize| -> Result<()> {
        let kargs = [KArg::of(list), KArg::of(&chunk_arg), KArg::of(&args)];
        // SAFETY: the arguments match `adam_step_list(AdamList, i64 chunk,
        // AdamArgs)`; each entry's four addresses (five with AMSGrad, whose
        // `x` the kernel reads only when `args.amsgrad` is set, and then
        // every entry has one) start `n` contiguous
        // elements of `d` inside live operands (a split tensor's later
        // entries start `chunk * MAX_ENTRY_BLOCKS` elements further on), the
        // written ones disjoint from every other operand (the caller's
        // check); entry t's blocks cover exactly its `n` elements.
        unsafe {
            launch(
                dev,
                &key,
                f[1],
                (blocks as u32, 1, 1),
                (BLOCK, 1, 1),
                dev.stream(),
                kargs,
            )
        }
    };
    let size = d.size() as u64;
    for AdamItem { p, g, m, v, max } in items {
        let n = p.layout.numel();
        let mut done = 0usize;
        while done < n {
            let len = (n - done).min(chunk * MAX_ENTRY_BLOCKS);
            if list.count as usize == LIST {
                flush(&list, blocks)?;
                list = empty;
                blocks = 0;
            }
            let t = list.count as usize;
            let skip = done as u64 * size;
            list.p[t] = base_ptr(p) + skip;
            list.g[t] = base_ptr(g) + skip;
            list.m[t] = base_ptr(m) + skip;
            list.v[t] = base_ptr(v) + skip;
            list.x[t] = max.as_ref().map_or(0, |x| base_ptr(x) + skip);
            list.n[t] = len as i64;
            list.first_block[t] = blocks as i32;
            blocks += len.div_ceil(chunk);
            list.first_block[t + 1] = blocks as i32;
            list.count += 1;
            done += len;
        }
    }
    if list.count > 0 {
        flush(&list, blocks)?;
    }
    Ok(())
}

/// One Adam / AdamW step over `n` elements of the contiguous `p`, `g`, `m`,
/// `v` (and `max` with AMSGrad; one float dtype, distinct storages).
pub(crate) fn adam_step(dev: &CudaDevice, it: &AdamItem<'_>, n: usize, s: &AdamStep) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    let d = it.p.dtype;
    let key = format!("adam_step:{}", tag(d));
    let f = super::nvrtc::functions(dev, &key, || source(d), &NAMES)?;
    let (pp, pg, pm, pv) = (
        base_ptr(&it.p),
        base_ptr(&it.g),
        base_ptr(&it.m),
        base_ptr(&it.v),
    );
    let px = it.max.as_ref().map_or(0, base_ptr);
    let vec = i32::from([pp, pg, pm, pv, px].iter().all(|a| a.is_multiple_of(16)));
    let per_thread = if vec == 1 { 16 / d.size() } else { 1 };
    let blocks = grid(dev, n.div_ceil(per_thread), BLOCK as usize);
    let args = AdamArgs::of(s);
    let n = n as i64;
    let kargs = [
        KArg::of(&pp),
        KArg::of(&pg),
        KArg::of(&pm),
        KArg::of(&pv),
        KArg::of(&px),
        KArg::of(&n),
        KArg::of(&args),
        KArg::of(&vec),
    ];
    // SAFETY: the arguments match `adam_step(char*, const char*, char*, char*,
    // char*, i64 n, AdamArgs, int)`; the four operands (five with AMSGrad:
    // `px` is 0 otherwise, and the kernel dereferences it only when
    // `args.amsgrad` is set, which `AdamStep` sets exactly when `max` is
    // present) are contiguous with `n` elements of `d` from their base
    // addresses, in distinct storages; `vec` is set only when all bases are
    // 16-byte aligned.
    unsafe {
        launch(
            dev,
            &key,
            f[0],
            (blocks, 1, 1),
            (BLOCK, 1, 1),
            dev.stream(),
            kargs,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// The host structs have the C layouts the kernels read: `AdamArgs` is
    /// seven doubles, three ints and its padding; `AdamList` ends with the
    /// block table and the count, and stays within the 4 KiB of kernel
    /// parameters.
    #[test]
    fn kernel_arguments_have_the_c_layout() {
        assert_eq!(size_of::<AdamArgs>(), 72);
        assert_eq!(offset_of!(AdamArgs, step_size), 48);
        assert_eq!(offset_of!(AdamArgs, decays), 56);
        assert_eq!(offset_of!(AdamArgs, maximize), 60);
        assert_eq!(offset_of!(AdamArgs, amsgrad), 64);
        assert_eq!(offset_of!(AdamList, x), 4 * 8 * LIST);
        assert_eq!(offset_of!(AdamList, n), 5 * 8 * LIST);
        assert_eq!(offset_of!(AdamList, first_block), 6 * 8 * LIST);
        assert_eq!(offset_of!(AdamList, count), 6 * 8 * LIST + 4 * (LIST + 1));
        assert!(size_of::<AdamList>() + 8 + size_of::<AdamArgs>() <= 4096);
    }
}
