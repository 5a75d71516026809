//! Host side of the sorting kernels (`kernels::sort`): sorts the chunks of
//! every row, merges runs pass by pass until each row is one run (keeping
//! only the first `k` pairs of each run for `topk`/`kthvalue`), then writes
//! the values and positions. All rows of a batch go through the same
//! launches; the pair buffers are scratch memory on the current stream.

use super::context::CudaDevice;
use super::dimops::grid;
use super::kernels::sort::{sort_source, CHUNK, SORT_NAMES};
use super::kernels::tag;
use super::launch::{base_ptr, launch, KArg};
use crate::backend::{SortKernel, SortPick};
use crate::dtype::DType;
use crate::error::{Result, TensorError};

/// Threads per block of the merge and finishing kernels.
const BLOCK: u32 = 256;

/// The runs of a pair buffer: `nruns` runs of `cap` pairs per row, the last
/// holding `last` (see `kernels::sort`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Runs {
    nruns: usize,
    cap: usize,
    last: usize,
}

impl Runs {
    fn rowlen(self) -> usize {
        (self.nruns - 1) * self.cap + self.last
    }

    /// The runs after one merge pass keeping at most `keep` pairs a run.
    fn merged(self, keep: usize) -> Runs {
        let nruns = self.nruns.div_ceil(2);
        let cap = (2 * self.cap).min(keep);
        let last = if self.nruns % 2 == 1 {
            // The last run has no partner: it moves on as it is.
            self.last
        } else {
            (self.cap + self.last).min(keep)
        };
        Runs { nruns, cap, last }
    }
}

/// The runs that sorting chunks of `c2` elements of rows of `n` leaves,
/// keeping at most `keep` pairs a run.
fn chunk_runs(n: usize, c2: usize, keep: usize) -> Runs {
    let nruns = n.div_ceil(c2);
    Runs {
        nruns,
        cap: c2.min(keep),
        last: (n - (nruns - 1) * c2).min(keep),
    }
}

/// The NaN key of a float dtype (the largest key), `None` for the others.
fn nan_key(d: DType) -> Option<u64> {
    match d {
        DType::F32 => Some(0xffff_ffff),
        DType::F64 => Some(u64::MAX),
        DType::F16 | DType::BF16 => Some(0xffff),
        _ => None,
    }
}

/// The XOR that turns an ascending key of `d` into a descending one.
fn flip_mask(d: DType) -> u64 {
    match d {
        DType::F64 | DType::I64 => u64::MAX,
        DType::F32 | DType::I32 => 0xffff_ffff,
        DType::F16 | DType::BF16 => 0xffff,
        DType::U8 => 0xff,
        DType::Bool => 1,
    }
}

/// Device memory for `n` pairs (a key buffer and a position buffer).
struct Pairs {
    keys: strata_alloc::Allocation,
    idx: strata_alloc::Allocation,
}

impl Pairs {
    fn new(dev: &CudaDevice, n: usize) -> Result<Pairs> {
        let bytes = n.checked_mul(8).ok_or_else(|| TensorError::SizeOverflow {
            op: "sort",
            msg: format!("{n} sort pairs do not fit in memory"),
        })?;
        Ok(Pairs {
            keys: dev.scratch(bytes.max(8))?,
            idx: dev.scratch(bytes.max(8))?,
        })
    }
}

/// Runs `k` (see [`SortKernel`]) on `dev`.
pub(crate) fn sort(dev: &CudaDevice, k: &SortKernel) -> Result<()> {
    let (rows, n) = (k.rows, k.n);
    let width = k.pick.width();
    if rows == 0 || n == 0 || width == 0 {
        return Ok(());
    }
    let d = k.input.dtype;
    // Pairs kept per run: the first `keep` of the order are all any pick
    // reads.
    let keep = match k.pick {
        SortPick::Head(h) => h,
        SortPick::Nth(p) => p + 1,
        SortPick::Median { .. } => n,
    };
    if keep == 0 || keep > n {
        return Err(TensorError::Index {
            op: "sort",
            msg: format!("cannot keep {keep} of {n} elements"),
        });
    }
    let key = format!("sort:{}", tag(d));
    let f = super::nvrtc::functions(dev, &key, || sort_source(d), &SORT_NAMES)?;
    let px = base_ptr(k.input);
    // Chunks: the smallest power of two holding a row, 64 to CHUNK.
    let c2 = n.next_power_of_two().clamp(64, CHUNK);
    let mut runs = chunk_runs(n, c2, keep);
    let total = rows
        .checked_mul(runs.rowlen())
        .ok_or_else(|| TensorError::SizeOverflow {
            op: "sort",
            msg: format!("{rows} rows of {n} elements"),
        })?;
    let mut cur = Pairs::new(dev, total)?;
    {
        let flip = if k.descending { flip_mask(d) } else { 0 };
        let (r, nn, nch) = (rows as i64, n as i64, runs.nruns as i64);
        let (cap, rowlen) = (runs.cap as i64, runs.rowlen() as i64);
        let (pk, pi) = (cur.keys.ptr(), cur.idx.ptr());
        let blocks = (rows * runs.nruns).clamp(1, i32::MAX as usize) as u32;
        let kargs = [
            KArg::of(&px),
            KArg::of(&pk),
            KArg::of(&pi),
            KArg::of(&r),
            KArg::of(&nn),
            KArg::of(&nch),
            KArg::of(&cap),
            KArg::of(&rowlen),
            KArg::of(&flip),
        ];
        // SAFETY: the arguments match `sort_chunks(const T*, u64*, i64*,
        // i64 rows, i64 n, i64 nchunks, i64 cap, i64 rowlen, u64 flip)`:
        // the input is contiguous with rows * n elements of `d`; the pair
        // buffers hold rows * rowlen pairs and each block writes at most
        // `cap` pairs of run `c` of its row (`last` for the last run). The
        // block has c2 / 2 threads (c2 a power of two, at most CHUNK).
        unsafe {
            launch(
                dev,
                &key,
                f[0],
                (blocks, 1, 1),
                ((c2 / 2) as u32, 1, 1),
                dev.stream(),
                kargs,
            )?;
        }
    }
    while runs.nruns > 1 {
        let next = runs.merged(keep);
        let out = Pairs::new(dev, rows * next.rowlen())?;
        let (r, nr, cap, last) = (
            rows as i64,
            runs.nruns as i64,
            runs.cap as i64,
            runs.last as i64,
        );
        let rowlen = runs.rowlen() as i64;
        let (ncap, nlast, nrowlen) = (next.cap as i64, next.last as i64, next.rowlen() as i64);
        let (ik, ii, ok, oi) = (cur.keys.ptr(), cur.idx.ptr(), out.keys.ptr(), out.idx.ptr());
        let g = grid(dev, rows * runs.rowlen(), BLOCK as usize);
        let kargs = [
            KArg::of(&ik),
            KArg::of(&ii),
            KArg::of(&ok),
            KArg::of(&oi),
            KArg::of(&r),
            KArg::of(&nr),
            KArg::of(&cap),
            KArg::of(&last),
            KArg::of(&rowlen),
            KArg::of(&ncap),
            KArg::of(&nlast),
            KArg::of(&nrowlen),
        ];
        // SAFETY: the arguments match `merge_runs(const u64*, const i64*,
        // u64*, i64*, i64 rows, i64 nruns, i64 cap, i64 last, i64 rowlen,
        // i64 ncap, i64 nlast, i64 nrowlen)`: the input buffers hold rows *
        // rowlen pairs laid out as `runs`, the output buffers rows *
        // nrowlen laid out as `next`; the kernel writes a pair only at a
        // place below its merged run's length.
        unsafe {
            launch(
                dev,
                &key,
                f[1],
                (g, 1, 1),
                (BLOCK, 1, 1),
                dev.stream(),
                kargs,
            )?;
        }
        // The old buffers go back to the cache ordered after this pass.
        cur = out;
        runs = next;
    }
    let rowlen = runs.rowlen();
    debug_assert!(rowlen >= keep.min(n));
    let (pv, po) = (base_ptr(k.values), base_ptr(k.indices));
    let (r, nn, rl) = (rows as i64, n as i64, rowlen as i64);
    let (pk, pi) = (cur.keys.ptr(), cur.idx.ptr());
    match k.pick {
        SortPick::Head(h) => {
            let hh = h as i64;
            let g = grid(dev, rows * h, BLOCK as usize);
            let kargs = [
                KArg::of(&px),
                KArg::of(&pi),
                KArg::of(&pv),
                KArg::of(&po),
                KArg::of(&r),
                KArg::of(&nn),
                KArg::of(&hh),
                KArg::of(&rl),
            ];
            // SAFETY: the arguments match `finish_head(const T*, const
            // i64*, T*, i64*, i64 rows, i64 n, i64 k, i64 rowlen)`; each
            // row's run holds rowlen >= k pairs; the outputs are contiguous
            // rows * k (values of `d`, i64 positions).
            unsafe {
                launch(
                    dev,
                    &key,
                    f[2],
                    (g, 1, 1),
                    (BLOCK, 1, 1),
                    dev.stream(),
                    kargs,
                )
            }
        }
        SortPick::Nth(_) | SortPick::Median { .. } => {
            let (mode, p): (i32, i64) = match k.pick {
                SortPick::Nth(p) => (0, p as i64),
                SortPick::Median { skip_nan } => (if skip_nan { 2 } else { 1 }, 0),
                SortPick::Head(_) => (0, 0),
            };
            let has_nan = i32::from(nan_key(d).is_some());
            let nk = nan_key(d).unwrap_or(u64::MAX);
            let g = grid(dev, rows, BLOCK as usize);
            let kargs = [
                KArg::of(&px),
                KArg::of(&pk),
                KArg::of(&pi),
                KArg::of(&pv),
                KArg::of(&po),
                KArg::of(&r),
                KArg::of(&nn),
                KArg::of(&rl),
                KArg::of(&mode),
                KArg::of(&p),
                KArg::of(&has_nan),
                KArg::of(&nk),
            ];
            // SAFETY: the arguments match `finish_pick(const T*, const
            // u64*, const i64*, T*, i64*, i64 rows, i64 n, i64 rowlen, int
            // mode, i64 p, int has_nan, u64 nan_key)`; each row's run holds
            // rowlen pairs (p < rowlen: the runs kept p + 1; a median's rows
            // are sorted in full); the outputs are contiguous `[rows]`.
            unsafe {
                launch(
                    dev,
                    &key,
                    f[3],
                    (g, 1, 1),
                    (BLOCK, 1, 1),
                    dev.stream(),
                    kargs,
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{chunk_runs, Runs};

    /// The run bookkeeping against a direct count: merging runs of sorted
    /// chunks keeps exactly min(keep, elements) pairs per row.
    #[test]
    fn runs_track_the_kept_pairs() {
        for n in [1usize, 5, 64, 65, 2048, 2049, 5000, 50257, 1 << 20] {
            for keep in [1usize, 2, 50, 2048, 3000, n] {
                if keep > n {
                    continue;
                }
                let c2 = n.next_power_of_two().clamp(64, 2048);
                let mut r = chunk_runs(n, c2, keep);
                // Pairs per run, directly.
                let mut lens: Vec<usize> = (0..n.div_ceil(c2))
                    .map(|c| (n - c * c2).min(c2).min(keep))
                    .collect();
                while r.nruns > 1 {
                    assert_eq!(lens.len(), r.nruns);
                    assert!(lens[..lens.len() - 1].iter().all(|&l| l == r.cap));
                    assert_eq!(*lens.last().unwrap(), r.last);
                    lens = lens
                        .chunks(2)
                        .map(|c| c.iter().sum::<usize>().min(keep))
                        .collect();
                    r = r.merged(keep);
                }
                assert_eq!(
                    r,
                    Runs {
                        nruns: 1,
                        cap: r.cap,
                        last: keep.min(n)
                    }
                );
                assert_eq!(r.rowlen(), keep.min(n));
            }
        }
    }
}
