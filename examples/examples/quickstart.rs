//! strata in one page: tensors on the device chosen by `STRATA_DEVICE`
//! (`cpu`, `cuda`, `cuda:N`; default: a GPU when present, else the CPU),
//! views that share memory, in-place ops on views, and the caching
//! allocator's statistics proving what allocates and what does not.
//!
//!     cargo run --release -p strata-examples --example quickstart

use strata::{default_device, memory_stats, DType, Device, Tensor};

/// The two statistics that matter here, under PyTorch's key names.
fn stats(device: Device) -> Result<(i64, i64), strata::AllocError> {
    let m = memory_stats(device)?.to_map();
    Ok((
        m["allocated_bytes.all.current"],
        m["allocation.all.allocated"],
    ))
}

fn show(label: &str, device: Device) {
    match stats(device) {
        Ok((bytes, count)) => println!("  [{label:<28}] allocated_bytes.all.current = {bytes:>8}   allocation.all.allocated = {count}"),
        Err(e) => println!("  [{label:<28}] no statistics: {e}"),
    }
}

fn main() {
    // Errors reach the user in their Display form ("shape mismatch in add: ..."),
    // not Debug.
    if let Err(e) = run() {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let device = default_device()?;
    println!("device: {device}\n");
    show("start", device);

    // A 3x4 tensor: one block from the caching allocator.
    let a = Tensor::arange(0.0, 12.0, 1.0, Some(DType::F32), device)?.reshape(&[3, 4])?;
    println!("a = {a}");
    show("after creating a", device);
    println!(
        "  (a holds 12 f32 = 48 bytes; the caching allocator rounds every block up\n   \
         to a multiple of 512 bytes, as PyTorch's does, so 512 bytes are allocated)"
    );

    // Views share a's storage: no allocation.
    let (before, n_before) = stats(device)?;
    let row = a.select(0, 1)?; // a[1]
    let at = a.t()?; // a^T, strides swapped
    let every_other = a.slice(1, None, None, 2)?; // a[:, ::2]
    let (after, n_after) = stats(device)?;
    println!(
        "\nviews: row {:?} strides {:?}, a^T {:?} strides {:?}, a[:, ::2] {:?} strides {:?}",
        row.shape(),
        row.strides(),
        at.shape(),
        at.strides(),
        every_other.shape(),
        every_other.strides()
    );
    println!(
        "       share a's storage: {} {} {} (storage {:#x})",
        row.same_storage(&a),
        at.same_storage(&a),
        every_other.same_storage(&a),
        a.storage_ptr()
    );
    assert!(row.same_storage(&a) && at.same_storage(&a) && every_other.same_storage(&a));
    assert_eq!(
        (before, n_before),
        (after, n_after),
        "views must not allocate"
    );
    show("after three views", device);

    // In-place ops on views write through to a, and allocate nothing.
    let ones = Tensor::ones(&[3, 4], DType::F32, device)?;
    let col = Tensor::from_slice(&[100.0f32, 200.0, 300.0], &[3, 1], device)?;
    let (before, n_before) = stats(device)?;
    row.mul_(10.0)?; // a[1] *= 10
    every_other.neg_()?; // a[:, ::2] = -a[:, ::2]
    a.add_(&ones)?; // a += 1
    a.add_(&col)?; // broadcast a [3, 1] column over a's rows
    at.clamp_(Some(-5.0), None::<f64>)?; // through the transpose
    let (after, n_after) = stats(device)?;
    println!("\nafter in-place ops on views:\na = {a}");
    println!("version counter of a's storage: {}", a.version());
    assert_eq!(
        (before, n_before),
        (after, n_after),
        "in-place ops must not allocate"
    );
    show("after 5 in-place ops", device);

    // An out-of-place op allocates its result; dropping it returns the block
    // to the cache (allocated bytes go back down; reserved memory stays cached).
    let c = (&a + &ones)?;
    show("after c = &a + &ones", device);
    let (with_c, _) = stats(device)?;
    drop(c);
    let (without_c, _) = stats(device)?;
    assert!(without_c < with_c);
    show("after drop(c)", device);

    // Reductions and a matrix product.
    println!("\nsum over rows = {}", a.sum(Some(&[1]), false)?);
    let (mx, idx) = a.max_dim(1, false)?;
    println!("max per row   = {mx}, at {idx}");
    println!("a @ a^T       =\n{}", a.matmul(&at)?);

    // Bad input is a typed error naming the shapes, never a panic.
    if let Err(e) = a.add_(
        &Tensor::ones(&[4], DType::F32, device)?
            .unsqueeze(0)?
            .expand(&[2, 4])?,
    ) {
        println!("\nerror (as expected): {e}");
    }
    if let Err(e) = a.t()?.view(&[12]) {
        println!("error (as expected): {e}");
    }

    println!(
        "\nreserved by the cache: {} bytes",
        strata::memory_reserved(device)?
    );
    println!(
        "  (blocks of up to 1 MiB come from the small pool, whose segments are\n   \
         2 MiB (2097152 bytes): the first small allocation reserved one segment,\n   \
         which stays cached for reuse after the tensors are freed)"
    );
    Ok(())
}
