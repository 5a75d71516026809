//! Session 59: the memory fraction against `throw_on_cudamalloc_oom`, as
//! PyTorch 2.15 orders them, and the hostile inputs of this session's sweep.
//!
//! # Which check comes first
//!
//! Read from PyTorch 2.15's own build (`libc10_cuda.so` of the `2.15.0+cu132`
//! wheel, `DeviceCachingAllocator::alloc_block`, `malloc`, `setMemoryFraction`
//! and `NativeCachingAllocator::init`, disassembled, since no 2.15 source was
//! at hand):
//!
//! 1. `alloc_block` first refuses a segment past the memory fraction in
//!    force (`set_fraction && total_allocated_memory + alloc_size >
//!    allowed_memory_maximum`): an ordinary failure, so `malloc` goes on
//!    down its retry chain (free oversize cached blocks, release the cache,
//!    retry), and in the end raises the ordinary out-of-memory error
//!    (`num_ooms` + 1, the `OOM` trace entry, the out-of-memory observers
//!    with `(device, alloc_size, allowed_memory_maximum, device_free)`, "N
//!    allowed;" in the message).
//! 2. Only a request within that limit meets `throw_on_cudamalloc_oom`'s
//!    check: `total_allocated_memory + alloc_size >
//!    (size_t)(device_total × CUDAAllocatorConfig::per_process_memory_fraction())`,
//!    the configuration's fraction (1 when unset), truncated. A rejection
//!    counts `num_oom_rejections` (not `num_ooms`), records no `OOM` entry,
//!    calls the rejection observers with `(device, alloc_size,
//!    total_allocated_memory, device_total)` and no out-of-memory observer,
//!    and raises "CUDA out of memory. Allocation was preemptively rejected
//!    because it would exceed per_process_memory_fraction limit. Requested
//!    size: <the request>". Both checks run in every `alloc_block` call, the
//!    retry after `release_cached_blocks` included: a request past the
//!    fraction in force whose retry, after the release, is within it but
//!    past the configuration's fraction is rejected then.
//! 3. `init` sets each device's fraction in force from the configuration
//!    (`setMemoryFraction(per_process_memory_fraction())`), whose limit is
//!    `fraction × total` rounded to the nearest byte (`std::round`);
//!    `set_per_process_memory_fraction` changes only the device's, and
//!    `_set_allocator_settings` only the configuration's.
//!
//! So a fraction given at start-up with `throw_on_cudamalloc_oom:True` makes
//! both limits the same and the key rejects nothing past the fraction;
//! PyTorch's own `test_throw_on_cudamalloc_oom`, which names the fraction in
//! `_set_allocator_settings` at run time, sees rejections. strata checked the
//! key first, against the fraction in force, and took a settings string's
//! fraction as the limit in force; it now does as above.

use super::common::{sim_device, stat};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use strata_alloc::{AllocError, StreamId};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const S0: StreamId = StreamId::DEFAULT;
const MODES: [&str; 2] = ["expandable_segments:False", "expandable_segments:True"];

/// The rejection observers' `(alloc_size, total_allocated, device_total)`.
type Rejections = Arc<Mutex<Vec<(u64, u64, u64)>>>;

/// Counts the out-of-memory and the rejection observers' calls.
fn observed(a: &strata_alloc::CachingAllocator) -> (Arc<AtomicUsize>, Rejections) {
    let ooms = Arc::new(AtomicUsize::new(0));
    let o = Arc::clone(&ooms);
    a.on_oom(move |_, _| {
        o.fetch_add(1, Ordering::SeqCst);
    });
    let rejections = Arc::new(Mutex::new(Vec::new()));
    let r = Arc::clone(&rejections);
    a.on_oom_rejection(move |x| {
        r.lock()
            .unwrap()
            .push((x.alloc_size, x.total_allocated, x.device_total))
    });
    (ooms, rejections)
}

/// A fraction given in the configuration at start-up, with
/// `throw_on_cudamalloc_oom:True`: both limits are 2 GiB of 4, and the
/// fraction in force is checked first, so a request past it is not
/// rejected: the cached 1.5 GiB segment is released and the request
/// retried (PyTorch's `release_cached_blocks`, `num_alloc_retries` 1), and
/// 1.8 GiB then fits. (strata rejected it, keeping the cache.)
#[test]
fn a_startup_fraction_with_throw_on_goes_the_ordinary_way() {
    let conf =
        "expandable_segments:False,per_process_memory_fraction:0.5,throw_on_cudamalloc_oom:True";
    let (_, a) = sim_device(conf, 4 * GIB);
    let (ooms, rejections) = observed(&a);
    drop(a.allocate(1536 * MIB, S0).unwrap());
    assert_eq!(a.memory_reserved(), 1536 * MIB);
    let x = a.allocate(1800 * MIB, S0).expect("released and retried");
    assert_eq!(a.memory_reserved(), 1800 * MIB);
    assert_eq!(stat(&a, "num_alloc_retries"), 1);
    assert_eq!(stat(&a, "num_oom_rejections"), 0);
    assert_eq!(stat(&a, "num_ooms"), 0);
    // Past the fraction with nothing to release: the ordinary error, the
    // out-of-memory observer, no rejection observer.
    let e = a.allocate(512 * MIB, S0).unwrap_err();
    assert!(matches!(e, AllocError::OutOfMemory(_)), "{e:?}");
    assert!(e.to_string().contains("allowed"), "{e}");
    assert_eq!(stat(&a, "num_ooms"), 1);
    assert_eq!(stat(&a, "num_oom_rejections"), 0);
    assert_eq!(ooms.load(Ordering::SeqCst), 1);
    assert!(rejections.lock().unwrap().is_empty());
    drop(x);
    a.check_consistency().unwrap();
}

/// `set_memory_fraction` (PyTorch's `set_per_process_memory_fraction`)
/// with `throw_on_cudamalloc_oom:True` and no fraction in the
/// configuration: the key's limit is the whole device, the fraction in
/// force is checked first, and a request past it fails the ordinary way
/// (`num_ooms`, the out-of-memory observer), in both segment modes.
#[test]
fn set_memory_fraction_past_its_limit_is_an_ordinary_out_of_memory() {
    for mode in MODES {
        let (_, a) = sim_device(&format!("{mode},throw_on_cudamalloc_oom:True"), 4 * GIB);
        let (ooms, rejections) = observed(&a);
        a.set_memory_fraction(0.25).unwrap();
        let e = a.allocate(1536 * MIB, S0).unwrap_err();
        assert!(matches!(e, AllocError::OutOfMemory(_)), "{mode}: {e:?}");
        assert_eq!(stat(&a, "num_ooms"), 1, "{mode}");
        assert_eq!(stat(&a, "num_oom_rejections"), 0, "{mode}");
        assert_eq!(ooms.load(Ordering::SeqCst), 1, "{mode}");
        assert!(rejections.lock().unwrap().is_empty(), "{mode}");
        // Past the whole device, with the fraction back at 1: rejected.
        a.set_memory_fraction(1.0).unwrap();
        let e = a.allocate(5 * GIB, S0).unwrap_err();
        assert!(matches!(e, AllocError::OomRejected { .. }), "{mode}: {e:?}");
        assert_eq!(stat(&a, "num_oom_rejections"), 1, "{mode}");
        assert_eq!(stat(&a, "num_ooms"), 1, "{mode}");
        assert_eq!(
            *rejections.lock().unwrap(),
            [(5 * GIB, 0, 4 * GIB)],
            "{mode}: (alloc_size, total_allocated, device_total)"
        );
        a.check_consistency().unwrap();
    }
}

/// PyTorch's `test_throw_on_cudamalloc_oom` names the fraction in
/// `_set_allocator_settings` at run time: that changes the configuration's
/// fraction, which the key measures against, and not the fraction in force
/// (`get_per_process_memory_fraction` still reads 1). So the key rejects a
/// request past 0.005 of the device, and without the key the same request
/// is served: no limit is in force.
#[test]
fn a_run_time_settings_fraction_is_the_keys_limit_not_the_one_in_force() {
    for mode in MODES {
        let (_, a) = sim_device(mode, 4 * GIB);
        a.set_allocator_settings(&format!(
            "{mode},throw_on_cudamalloc_oom:True,per_process_memory_fraction:0.005"
        ))
        .unwrap();
        assert_eq!(a.memory_fraction(), 1.0, "{mode}: the fraction in force");
        assert_eq!(a.config().per_process_memory_fraction, Some(0.005));
        let limit = (0.005 * (4 * GIB) as f64) as u64; // 21474836, truncated
        let e = a.allocate(limit + MIB, S0).unwrap_err();
        assert!(
            matches!(e, AllocError::OomRejected { limit: l, .. } if l == limit),
            "{mode}: {e:?}"
        );
        a.set_allocator_settings(&format!("{mode},throw_on_cudamalloc_oom:False"))
            .unwrap();
        let x = a.allocate(limit + MIB, S0).expect("no limit in force");
        drop(x);
        a.check_consistency().unwrap();
    }
}

/// `set_memory_fraction(0.75)` above a configuration's 0.5 with the key on:
/// a request between the two limits is rejected at once (within the one in
/// force, past the key's), one past 0.75 fails the ordinary way.
#[test]
fn between_the_two_limits_the_key_rejects() {
    let conf =
        "expandable_segments:False,per_process_memory_fraction:0.5,throw_on_cudamalloc_oom:True";
    let (_, a) = sim_device(conf, 4 * GIB);
    a.set_memory_fraction(0.75).unwrap();
    let e = a.allocate(2560 * MIB, S0).unwrap_err();
    assert!(
        matches!(e, AllocError::OomRejected { limit, .. } if limit == 2 * GIB),
        "{e:?}"
    );
    let e = a.allocate(3584 * MIB, S0).unwrap_err();
    assert!(matches!(e, AllocError::OutOfMemory(_)), "{e:?}");
    assert_eq!(stat(&a, "num_oom_rejections"), 1);
    assert_eq!(stat(&a, "num_ooms"), 1);
    a.check_consistency().unwrap();
}

/// The check in every `alloc_block`: with 0.75 in force and the key at
/// 0.5, 1.5 GiB cached and a 1.6 GiB request (3.1 GiB in all, past 3 GiB),
/// the first device allocation fails the ordinary way; the cache is
/// released and the retry (1.6 GiB, within 3 GiB but past 2 GiB) is
/// rejected: `num_alloc_retries` 1, `num_oom_rejections` 1, `num_ooms` 0,
/// and the cached segment is gone.
#[test]
fn the_retry_after_the_release_is_rejected() {
    let conf =
        "expandable_segments:False,per_process_memory_fraction:0.5,throw_on_cudamalloc_oom:True";
    let (_, a) = sim_device(conf, 4 * GIB);
    a.set_memory_fraction(0.75).unwrap();
    drop(a.allocate(1536 * MIB, S0).unwrap());
    let e = a.allocate(2100 * MIB, S0).unwrap_err();
    assert!(matches!(e, AllocError::OomRejected { .. }), "{e:?}");
    assert_eq!(stat(&a, "num_alloc_retries"), 1);
    assert_eq!(stat(&a, "num_oom_rejections"), 1);
    assert_eq!(stat(&a, "num_ooms"), 0);
    assert_eq!(a.memory_reserved(), 0, "released before the retry");
    a.check_consistency().unwrap();
}

/// PyTorch 2.15's `setMemoryFraction` rounds `fraction × total` to the
/// nearest byte: on a device of 256 MiB − 1 byte, 0.5 is 128 MiB − 0.5
/// bytes, which rounds (halves away from zero) to 128 MiB, so a 128 MiB
/// segment fits exactly.
#[test]
fn the_fraction_in_force_rounds_to_the_nearest_byte() {
    let (_, a) = sim_device("expandable_segments:False", 256 * MIB - 1);
    a.set_memory_fraction(0.5).unwrap();
    let x = a.allocate(128 * MIB, S0).expect("within the rounded limit");
    assert_eq!(a.memory_reserved(), 128 * MIB);
    let e = a.allocate(512, S0).unwrap_err();
    assert!(matches!(e, AllocError::OutOfMemory(_)), "{e:?}");
    drop(x);
}

// ---------------------------------------------------------------------------
// The settings parser against PyTorch 2.15's
// ---------------------------------------------------------------------------

/// 430 settings strings through PyTorch 2.15's own parser
/// (`torch._C._accelerator_setAllocatorSettings`, the CPU wheel's, which
/// registers the CUDA keys) and through strata's: every difference but one
/// kind was one strata documents (malformed numbers that `stoull`/`stod`
/// read a prefix of, bad reserves PyTorch warns about, the three
/// device-generic key spellings). The exception: class names of
/// `expandable_segments_reserve_by_class`. PyTorch takes any token as a
/// class (`[a.b:0.5]`, `[é:0.5]`, `[>:0.5]`, silently); strata refused all
/// but letters, digits, `_` and `-`. It takes them now, and a stream tagged
/// with such a class gets its reserve: 0.125 of an 8 GiB device is 1 GiB,
/// too small for a 2 GiB allocation, which fails naming the reserve.
#[test]
fn reserve_class_names_are_what_pytorchs_tokenizer_reads() {
    use strata_alloc::{AllocatorConfig, Reserve};
    for class in ["a.b", "é", ">", "serving-v2", "x/y", "🙂"] {
        let s = format!("expandable_segments_reserve_by_class:[{class}:0.125]");
        let c = AllocatorConfig::parse(&s).unwrap_or_else(|e| panic!("{s}: {e}"));
        assert_eq!(
            c.expandable_segments_reserve_by_class,
            [(class.to_string(), Reserve::Fraction(0.125))]
        );
        assert_eq!(AllocatorConfig::parse(&c.to_string()).unwrap(), c, "{s}");
        let (_, a) = sim_device(&format!("expandable_segments:True,{s}"), 8 * GIB);
        let st = StreamId(3);
        a.set_stream_reserve_class(st, class);
        let e = a.allocate(2 * GIB, st).unwrap_err();
        assert!(e.to_string().contains("expandable-segment reserve"), "{e}");
        assert!(a.allocate(512 * MIB, st).is_ok());
        // The same class from code.
        let (_, b) = sim_device("expandable_segments:True", 8 * GIB);
        b.set_default_reserve_fraction_for_class(class, 0.125)
            .unwrap();
        assert_eq!(b.config(), c.reparse("expandable_segments:True").unwrap());
    }
    // Names a settings string cannot hold stay refused, and change nothing.
    let (_, a) = sim_device("", GIB);
    let before = a.config();
    for class in ["", "a b", "a:b", "a,b", "[a]", "a\tb"] {
        let e = a
            .set_default_reserve_fraction_for_class(class, 0.5)
            .unwrap_err();
        assert!(e.to_string().contains("class name"), "{class:?}: {e}");
        assert_eq!(a.config(), before);
    }
}

// ---------------------------------------------------------------------------
// Two driver failures in one growth
// ---------------------------------------------------------------------------

/// A growth of an expandable segment whose `set_access` fails after its
/// page was mapped undoes the mapping; when that `unmap` fails too, the
/// mapping stayed on the device with no block and no page record, its
/// handle could never be released (the driver refuses a mapped one), and
/// every later `empty_cache` failed, giving the range back while still
/// mapped ("range still has mappings"), with 2 MiB held for good. The
/// mapping is now kept and unmapped again by the next release of the cache,
/// or by a growth over its address: the device ends empty either way. A
/// growth whose unmapping of it fails again gives back the pages it made
/// for itself (they leaked too, at first, in this session's sweep).
#[test]
fn a_failed_undo_of_a_growth_leaks_no_page() {
    for grow_again in [false, true] {
        if grow_again {
            let (d, a) = sim_device("expandable_segments:True", GIB);
            d.inject_failure("set_access", 1);
            d.inject_failure("unmap", 2);
            assert!(a.allocate(512, S0).is_err());
            let stray = d.live_objects();
            let e = a.allocate(512, S0).unwrap_err();
            assert!(e.to_string().contains("unmap"), "{e}");
            assert_eq!(d.live_objects(), stray, "no page made and kept");
            a.empty_cache().unwrap();
            assert_eq!(d.live_objects(), (0, 0, 0, 0));
            a.check_consistency().unwrap();
        }
        let (d, a) = sim_device("expandable_segments:True", GIB);
        d.inject_failure("set_access", 1);
        d.inject_failure("unmap", 1);
        let e = a.allocate(512, S0).unwrap_err();
        assert!(
            matches!(&e, AllocError::Driver { .. }) && e.to_string().contains("set_access"),
            "{e}"
        );
        assert_eq!(a.memory_reserved(), 0);
        a.check_consistency().unwrap();
        if grow_again {
            // The next growth maps the same page of the same range.
            let x = a
                .allocate(512, S0)
                .expect("the stray mapping is unmapped first");
            assert_eq!(a.memory_reserved(), 2 * MIB);
            drop(x);
        }
        a.empty_cache()
            .expect("nothing left that the driver refuses");
        assert_eq!(d.live_objects(), (0, 0, 0, 0), "grow_again {grow_again}");
        assert_eq!(d.used_bytes(), 0);
        a.empty_cache().unwrap();
        a.check_consistency().unwrap();
    }
}
