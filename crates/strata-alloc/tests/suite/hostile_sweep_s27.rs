//! Session 27's sweep of hostile inputs to the allocator's public API (after
//! `hostile_inputs.rs` and `hostile_inputs_2.rs`): each input gets a typed
//! error (or the documented answer), and a refused call leaves settings,
//! statistics and snapshot as they were.
//!
//! Defects these tests found (fixed with them):
//!
//! * `SimDriver::malloc` of a size near `u64::MAX` wrapped `used + size` and
//!   handed the segment out; through `large_segment_size_mb` just below
//!   2^44 MiB, a 5 MiB request then succeeded with `reserved_bytes` negative;
//! * `fits_fraction` wrapped `reserved + segment` the same way, so a request
//!   far past `per_process_memory_fraction` reached the driver;
//! * `apply_config` / `try_new` installed NaN, infinite, zero or negative
//!   `expandable_segments_reserve(_by_class)` values and malformed class
//!   names, whose string form no parser accepts;
//! * the registry's `set_allocator_settings` with a string one installed
//!   allocator refused reconfigured the allocators before it, then failed;
//! * a simulated device of capacity near `u64::MAX` with expandable segments
//!   wrapped `capacity + capacity / 8` and aborted the process sizing the
//!   segment's page table (a host allocation of terabytes): the reserve now
//!   saturates and a page table that cannot be allocated is an out-of-memory
//!   error;
//! * `Device::parse` took `cuda:+1` and `cuda:01` for `cuda:1` (PyTorch's
//!   `torch.device` refuses both).

use crate::common;

use common::{sim, state, stats_but_ooms, OnDevice};
use std::sync::Arc;
use strata_alloc::config::Reserve;
use strata_alloc::driver::sim::SimDriver;
use strata_alloc::pinned::{PinnedAllocator, PinnedError, SimPinnedBackend};
use strata_alloc::{
    AllocError, AllocatorConfig, CachingAllocator, ConfigError, Device, Driver, DriverError,
    MemPoolOptions, StreamId,
};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const S0: StreamId = StreamId::DEFAULT;

// ----- regressions -------------------------------------------------------------

/// `SimDriver::malloc` of a size near `u64::MAX` once some memory was in use:
/// `used + size` wrapped below the capacity, so the driver handed out a
/// segment of almost 2^64 bytes and its free memory wrapped. It is an
/// out-of-memory error, and the driver's figures stay as they were.
#[test]
fn sim_driver_sizes_near_u64_max_are_out_of_memory() {
    let d = SimDriver::new(GIB, 2 * MIB);
    let p = d.malloc(2 * MIB).unwrap();
    let before = d.mem_get_info().unwrap();
    for size in [u64::MAX, u64::MAX - MIB, u64::MAX - 2 * MIB + 1, 1 << 63] {
        assert_eq!(d.malloc(size), Err(DriverError::OutOfMemory), "{size}");
        assert_eq!(d.mem_get_info().unwrap(), before, "{size}");
    }
    d.free(p, 2 * MIB).unwrap();
    assert_eq!(d.mem_get_info().unwrap().free, GIB);
}

/// A `large_segment_size_mb` just below the 2^44 MiB the parser accepts (a
/// segment of almost 2^64 bytes) with memory already reserved: the fraction
/// check `reserved + segment <= limit` wrapped and passed, the simulated
/// device handed the segment out, and `reserved_bytes` went negative. A
/// 5 MiB request is now an out-of-memory error that changes nothing but the
/// out-of-memory counters.
#[test]
fn a_segment_size_near_u64_max_never_wraps_the_reserved_bytes() {
    for fraction in ["", ",per_process_memory_fraction:0.5"] {
        let conf = format!(
            "expandable_segments:False,large_segment_size_mb:17592186044415,max_split_size_mb:17592186044415{fraction}"
        );
        let a = sim(&conf);
        let small = a.allocate_raw(512, S0).unwrap();
        let before = stats_but_ooms(&a);
        let mallocs = a.driver_calls().malloc;
        let e = a.allocate_raw(5 * MIB, S0).unwrap_err();
        assert!(e.is_out_of_memory(), "{conf}: {e:?}");
        if !fraction.is_empty() {
            // Past the fraction's limit: the device is not even asked.
            assert_eq!(a.driver_calls().malloc, mallocs, "{conf}");
            assert_eq!(e.out_of_memory().unwrap().allowed, Some(8 * GIB));
        }
        assert_eq!(stats_but_ooms(&a), before, "{conf}");
        assert_eq!(a.memory_reserved(), 2 * MIB, "{conf}");
        a.check_consistency().unwrap();
        a.free_raw(small).unwrap();
        a.empty_cache().unwrap();
        assert_eq!(a.memory_reserved(), 0, "{conf}");
        assert_eq!(a.mem_get_info().unwrap().free, 1 << 34, "{conf}");
    }
}

/// `apply_config` and `try_new` with an `expandable_segments_reserve` (or a
/// class of `expandable_segments_reserve_by_class`) that the parser refuses:
/// NaN, infinite, zero or negative reserves, and class names that are empty
/// or hold separators. Each was installed, and the configuration then printed
/// a string (`expandable_segments_reserve:NaN`) that no parser accepts. Now a
/// `BadValue` naming the key, and nothing changed.
#[test]
fn apply_config_refuses_bad_reserves() {
    let a = sim("expandable_segments:True,expandable_segments_reserve:0.5");
    let keep = a.allocate_raw(30 * MIB, S0).unwrap();
    let before = state(&a);
    let bad_reserves = [
        Reserve::Fraction(f64::NAN),
        Reserve::Fraction(f64::INFINITY),
        Reserve::Fraction(0.0),
        Reserve::Fraction(-0.0),
        Reserve::Fraction(-0.5),
        Reserve::Gib(f64::NAN),
        Reserve::Gib(f64::NEG_INFINITY),
        Reserve::Gib(0.0),
        Reserve::Gib(-8.0),
    ];
    let mut configs: Vec<(AllocatorConfig, &str)> = Vec::new();
    for r in bad_reserves {
        let mut c = a.config();
        c.expandable_segments_reserve = Some(r);
        configs.push((c, "expandable_segments_reserve"));
        let mut c = a.config();
        c.expandable_segments_reserve_by_class =
            vec![("ok".into(), Reserve::Gib(1.0)), ("x".into(), r)];
        configs.push((c, "expandable_segments_reserve_by_class"));
    }
    // (`ｘ` was here too; PyTorch 2.15 takes any token as a class name, and
    // so does strata since session 59: hostile_s59.rs.)
    for name in ["", "a b", "a:b", "a,b", "[a]", "a\n"] {
        let mut c = a.config();
        c.expandable_segments_reserve_by_class = vec![(name.to_string(), Reserve::Fraction(0.25))];
        configs.push((c, "expandable_segments_reserve_by_class"));
    }
    for (c, key) in configs {
        let what = format!("{:?}", c.expandable_segments_reserve_by_class);
        match a.apply_config(c.clone()) {
            Err(AllocError::Config(ConfigError::BadValue { key: k, .. })) => {
                assert_eq!(k, key, "{what}")
            }
            other => panic!("{what}: expected BadValue, got {other:?}"),
        }
        assert_eq!(state(&a), before, "{what}");
        let d = Arc::new(SimDriver::new(GIB, 2 * MIB));
        assert!(
            matches!(
                CachingAllocator::try_new(d, c),
                Err(AllocError::Config(ConfigError::BadValue { .. }))
            ),
            "{what}"
        );
    }
    // What the parser accepts, built field by field, is accepted, and its
    // string form parses back to it.
    let mut c = a.config();
    c.expandable_segments_reserve = Some(Reserve::Gib(1e300));
    c.expandable_segments_reserve_by_class = vec![
        ("tiny_1-x".into(), Reserve::Fraction(1e-300)),
        ("big".into(), Reserve::Fraction(4.0)),
    ];
    a.apply_config(c.clone()).unwrap();
    assert_eq!(AllocatorConfig::parse(&c.to_string()).unwrap(), c);
    a.free_raw(keep).unwrap();
    a.check_consistency().unwrap();
}

// ----- inputs that were already handled ----------------------------------------

/// Pinned `record_event` with addresses that are not inside a live buffer
/// (0, `u64::MAX`, one past the end, a freed buffer's): `InvalidPointer`,
/// and nothing recorded.
#[test]
fn pinned_record_event_outside_live_buffers() {
    let b = Arc::new(SimPinnedBackend::new(Some(GIB)));
    let p = PinnedAllocator::new(Arc::clone(&b));
    let live = p.allocate(5000).unwrap();
    let freed = p.allocate(3 * MIB).unwrap();
    let freed_ptr = freed.ptr();
    drop(freed);
    let before = p.stats();
    for ptr in [
        0,
        u64::MAX,
        live.ptr() + live.capacity(),
        freed_ptr,
        freed_ptr + 1,
    ] {
        assert!(
            matches!(
                p.record_event(ptr, StreamId(u64::MAX)),
                Err(PinnedError::InvalidPointer { .. })
            ),
            "{ptr:#x}"
        );
        assert_eq!(p.stats(), before, "{ptr:#x}");
    }
    // Inside the live buffer: recorded on a stream never seen before.
    p.record_event(live.ptr() + 4999, StreamId(u64::MAX))
        .unwrap();
    drop(live);
    assert_eq!(p.pending_events(), 1);
    b.complete_all();
    p.process_pending_events();
    assert_eq!(p.pending_events(), 0);
    p.check_consistency().unwrap();
}

/// Memory-pool guards dropped out of the order they were made in: the
/// thread is routed to the latest guard still alive, use counts come back
/// to 1, and a guard leaked with `mem::forget` keeps its pool alive (the
/// pool is in use) rather than leaving the thread routed to a forgotten pool.
#[test]
fn pool_guards_dropped_out_of_order_and_leaked() {
    let a = sim("");
    let p1 = a.mem_pool(MemPoolOptions::default());
    let p2 = a.mem_pool(MemPoolOptions {
        no_split: true,
        ..Default::default()
    });
    let p3 = a.mem_pool(MemPoolOptions::default());
    let g1 = p1.activate().unwrap();
    let g2 = p2.activate().unwrap();
    let g3 = p3.activate().unwrap();
    drop(g1);
    assert_eq!(a.active_mem_pool(), Some(p3.id()));
    drop(g3);
    assert_eq!(a.active_mem_pool(), Some(p2.id()));
    let x = a.allocate(MIB, S0).unwrap();
    assert!(p2
        .snapshot()
        .iter()
        .any(|s| s.blocks.iter().any(|b| b.address == x.ptr())));
    drop(g2);
    assert_eq!(a.active_mem_pool(), None);
    assert_eq!((p1.use_count(), p2.use_count(), p3.use_count()), (1, 1, 1));
    drop(x);
    drop((p2, p3));
    a.check_consistency().unwrap();

    std::mem::forget(p1.activate().unwrap());
    let id = p1.id();
    drop(p1);
    assert_eq!(a.active_mem_pool(), Some(id));
    let y = a.allocate(MIB, S0).unwrap();
    assert!(a
        .snapshot()
        .iter()
        .any(|s| s.pool_id == id && s.blocks.iter().any(|b| b.address == y.ptr())));
    drop(y);
    a.empty_cache().unwrap();
    a.check_consistency().unwrap();
}

/// The registry's `set_allocator_settings` with a string that one installed
/// allocator refuses (a split limit below its own `large_segment_size_mb`)
/// while the others accept it: the allocators before it in the registry's
/// order were reconfigured, the rest not, and the call returned the error.
/// Now it is the error and no allocator changes.
#[test]
fn registry_settings_refused_by_one_allocator_change_none() {
    let _settings = super::common::process_settings_lock();
    let mut all = Vec::new();
    for n in 1..=8 {
        let d = Arc::new(OnDevice(n, SimDriver::new(GIB, 2 * MIB)));
        all.push(CachingAllocator::new(d, AllocatorConfig::default()));
    }
    let d = Arc::new(OnDevice(9, SimDriver::new(GIB, 2 * MIB)));
    all.push(CachingAllocator::new(
        d,
        AllocatorConfig::parse("large_segment_size_mb:64").unwrap(),
    ));
    for a in &all {
        strata_alloc::set_allocator(Arc::clone(a));
    }
    let before: Vec<_> = all.iter().map(|a| state(a)).collect();
    match strata_alloc::set_allocator_settings("max_split_size_mb:32,roundup_power2_divisions:4") {
        Err(AllocError::Config(ConfigError::BadValue { key, .. })) => {
            assert_eq!(key, "max_split_size_mb")
        }
        other => panic!("expected BadValue, got {other:?}"),
    }
    for (a, before) in all.iter().zip(&before) {
        assert!(state(a) == *before, "{} changed", a.device());
    }
    // A string every allocator accepts reaches them all.
    strata_alloc::set_allocator_settings("max_split_size_mb:64,roundup_power2_divisions:4")
        .unwrap();
    for a in &all {
        assert_eq!(a.config().roundup_power2_divisions, [4; 16]);
        a.check_consistency().unwrap();
    }
}

#[test]
fn a_device_of_capacity_near_u64_max_never_aborts() {
    for conf in ["", "expandable_segments:True", "expandable_segments:False"] {
        let d = Arc::new(SimDriver::new(u64::MAX, 2 * MIB));
        let a = CachingAllocator::new(d, AllocatorConfig::parse(conf).unwrap());
        // Either the request is served or it is a typed out-of-memory error
        // (the page table of a 2^64-byte range cannot be allocated on the
        // host); the process goes on and the books stay consistent.
        match a.allocate_raw(MIB, S0) {
            Ok(r) => {
                assert!(r.size() >= MIB, "{conf}");
                a.free_raw(r).unwrap();
            }
            Err(e) => assert!(matches!(e, AllocError::OutOfMemory { .. }), "{conf}: {e}"),
        }
        a.check_consistency().unwrap();
        a.empty_cache().unwrap();
        assert_eq!(a.memory_stats().reserved_bytes.all().current, 0, "{conf}");
    }
}

#[test]
fn device_strings_are_read_as_pytorch_reads_them() {
    for bad in [
        "cuda:+1",
        "cuda:01",
        "cuda:-1",
        "cuda:",
        "cuda: 1",
        "cuda:1x",
        "CUDA:1",
        "cuda:99999999999999999999999",
    ] {
        let e = Device::parse(bad).unwrap_err();
        assert!(matches!(e, AllocError::InvalidDevice { .. }), "{bad}: {e}");
    }
    assert_eq!(Device::parse("cuda:0").unwrap(), Device::Cuda(0));
    assert_eq!(Device::parse("cuda:10").unwrap(), Device::Cuda(10));
    assert_eq!(Device::parse("cuda").unwrap(), Device::Cuda(0));
    assert_eq!(Device::parse("cpu").unwrap(), Device::Cpu);
}
