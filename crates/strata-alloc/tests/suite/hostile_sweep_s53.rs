//! Session 53's sweep of hostile inputs to strata-alloc's public API (after
//! `hostile_sweep_s52.rs`).
//!
//! **Settings strings against PyTorch 2.15 itself, the forms session 52's
//! 35,000 strings left out.** The same harness (a C++ program linked
//! against a PyTorch 2.15 wheel's `libc10.so`/`libc10_cuda.so` calling
//! `c10::CachingAllocator::setAllocatorSettings` in a fresh process per
//! string, and printing every value both configurations hold) ran 2,581
//! new strings: NUL bytes at every position of valid strings (none of the
//! earlier strings held one), numbers padded to 5,000 digits, strings of
//! 3,000 pairs and lists of 3,000 entries, C whitespace (`' '`, `\t`, `\n`,
//! `\r`, `\v`, `\f`) around every token of `roundup_power2_divisions` and
//! `expandable_segments_reserve_by_class` lists, every order of
//! `large_segment_size_mb`, `max_split_size_mb` and
//! `max_non_split_rounding_mb` in one string and across two, and
//! `backend`'s values. strata and PyTorch accepted and refused the same
//! strings with the same values, except 19 strings with a NUL byte inside a
//! number: PyTorch's `stoull`/`stod` read the digits before the NUL
//! (`max_split_size_mb:64\0` is 64 MiB), strata refuses the value, as it
//! refuses every number those functions read a prefix of (`20abc`, `20.5`:
//! docs/allocator.md, "Keys"). The tests below pin each family with the
//! figures PyTorch printed; none found a defect.
//!
//! **History with a one-entry ring** (`max_entries` 0 now records, as
//! PyTorch's `setMaxEntries` keeps at least one entry): a long run of
//! allocations, frees (immediate and waiting on other streams), snapshots,
//! `empty_cache`, option changes and clears keeps at most one entry, the
//! pickled snapshot and the JSON history stay readable, and the statistics
//! equal a recount of the snapshot.
//!
//! **A snapshot file path holding a NUL byte**: a typed `AllocError::Write`,
//! no file, no `snapshot` trace event.

use super::common::{decode, key, list, sim_device, state};
use strata_alloc::history::{Action, HistoryOptions};
use strata_alloc::{AllocError, AllocatorConfig, ConfigError, StreamId};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const S0: StreamId = StreamId::DEFAULT;

// ---------------------------------------------------------------------------
// Settings strings: NUL bytes
// ---------------------------------------------------------------------------

/// Strings with a NUL byte are refused with a typed error that names the key
/// (or the malformed piece), and a live allocator keeps its settings,
/// statistics, segments and fraction. PyTorch refuses the same strings
/// except the last group, where its `stoull`/`stod` stop at the NUL
/// (`max_split_size_mb:64\0` gives 64 MiB there): a malformed number, which
/// strata refuses as it refuses `20abc`.
#[test]
fn nul_bytes_in_settings_are_refused_and_change_nothing() {
    let (_, a) = sim_device("expandable_segments:False", GIB);
    a.set_allocator_settings("max_split_size_mb:40,garbage_collection_threshold:0.6")
        .unwrap();
    let live = a.allocate(3 * MIB, S0).unwrap();
    drop(a.allocate(MIB, S0).unwrap());
    let before = state(&a);
    // Refused by PyTorch too ("Unrecognized key").
    for s in [
        "\0",
        "\0,",
        "\0max_split_size_mb:64",
        "max_split\0_size_mb:64",
    ] {
        let e = a.set_allocator_settings(s).unwrap_err();
        match &e {
            AllocError::Config(ConfigError::UnknownKey { key }) => {
                assert!(key.contains('\0'), "{s:?}: {key:?}")
            }
            AllocError::Config(ConfigError::Malformed { near }) => {
                assert!(near.contains('\0'), "{s:?}: {near:?}")
            }
            other => panic!("{s:?}: {other}"),
        }
        assert_eq!(state(&a), before, "{s:?}");
        assert!(AllocatorConfig::parse(s).is_err(), "{s:?}");
    }
    // A comma then a NUL: an empty entry and a stray byte (PyTorch:
    // "Unrecognized key ','").
    assert!(matches!(
        a.set_allocator_settings(",\0"),
        Err(AllocError::Config(ConfigError::Malformed { .. }))
    ));
    assert_eq!(state(&a), before);
    // PyTorch reads the digits before the NUL; strata refuses the value.
    for (s, k) in [
        ("max_split_size_mb:64\0", "max_split_size_mb"),
        ("large_segment_size_mb:20\0\0", "large_segment_size_mb"),
        (
            "pinned_max_cached_size_mb:10\x000",
            "pinned_max_cached_size_mb",
        ),
        (
            "roundup_power2_divisions:4,garbage_collection_threshold:0.5\0",
            "garbage_collection_threshold",
        ),
        (
            "roundup_power2_divisions:[64:8\0,128:2,>:1]",
            "roundup_power2_divisions",
        ),
    ] {
        let e = a.set_allocator_settings(s).unwrap_err();
        assert!(
            matches!(&e, AllocError::Config(ConfigError::BadValue { key, value, .. })
                if *key == k && value.contains('\0')),
            "{s:?}: {e}"
        );
        assert!(e.to_string().starts_with(&format!("{k} is invalid")), "{e}");
        assert_eq!(state(&a), before, "{s:?}");
    }
    drop(live);
    a.check_consistency().unwrap();
}

// ---------------------------------------------------------------------------
// Settings strings: long numbers and long strings
// ---------------------------------------------------------------------------

/// Numbers padded with 5,000 zeros are read as PyTorch reads them (its
/// `stoull`/`stod` skip leading zeros: `max_split_size_mb:0…064` is
/// 67108864 bytes, `pinned_num_register_threads:0…064` is 64,
/// `garbage_collection_threshold:0…0.5` and `0.50…0` are 0.5); 5,000 nines
/// overflow (`stoull` throws "stoull") and are refused. A fraction of 0.9
/// followed by 1,000 more nines rounds to 1.0: accepted as
/// `per_process_memory_fraction` (PyTorch prints 1), refused as
/// `garbage_collection_threshold` (PyTorch: "set it in (0.0, 1.0)"). A 0.
/// followed by 400 zeros and a 5 underflows (`stod` throws "stod"): refused
/// by both keys.
#[test]
fn padded_and_overlong_numbers_read_as_pytorch_reads_them() {
    let z = "0".repeat(5000);
    let nines = "9".repeat(5000);
    let c = AllocatorConfig::parse(&format!("max_split_size_mb:{z}64")).unwrap();
    assert_eq!(c.max_split_size, Some(64 * MIB));
    let c = AllocatorConfig::parse(&format!("pinned_num_register_threads:{z}64")).unwrap();
    assert_eq!(c.pinned_num_register_threads, 64);
    let c = AllocatorConfig::parse(&format!("large_segment_size_mb:{z}64")).unwrap();
    assert_eq!(
        (c.large_segment_size, c.max_non_split_rounding),
        (64 * MIB, 64 * MIB)
    );
    let c = AllocatorConfig::parse(&format!("pinned_reserve_segment_size_mb:{z}64")).unwrap();
    assert_eq!(c.pinned_reserve_segment_size, 64 * MIB);
    for s in [
        format!("garbage_collection_threshold:{z}0.5"),
        format!("garbage_collection_threshold:0.5{z}"),
    ] {
        let c = AllocatorConfig::parse(&s).unwrap();
        assert_eq!(c.garbage_collection_threshold, Some(0.5));
    }
    for k in [
        "max_split_size_mb",
        "pinned_num_register_threads",
        "large_segment_size_mb",
        "max_non_split_rounding_mb",
        "pinned_max_round_threshold_mb",
        "pinned_reserve_segment_size_mb",
    ] {
        let e = AllocatorConfig::parse(&format!("{k}:{nines}")).unwrap_err();
        assert!(
            matches!(&e, ConfigError::BadValue { key, .. } if *key == k),
            "{k}: {e}"
        );
    }
    let almost_one = format!("0.{}", "9".repeat(1000));
    let c = AllocatorConfig::parse(&format!("per_process_memory_fraction:{almost_one}")).unwrap();
    assert_eq!(c.per_process_memory_fraction, Some(1.0));
    assert!(matches!(
        AllocatorConfig::parse(&format!("garbage_collection_threshold:{almost_one}")),
        Err(ConfigError::BadValue {
            key: "garbage_collection_threshold",
            ..
        })
    ));
    let tiny = format!("0.{}5", "0".repeat(400));
    for k in [
        "garbage_collection_threshold",
        "per_process_memory_fraction",
    ] {
        assert!(
            matches!(AllocatorConfig::parse(&format!("{k}:{tiny}")),
                Err(ConfigError::BadValue { key, .. }) if key == k),
            "{k}"
        );
    }
    // 3,000 pairs and a 3,000-entry list: accepted, the last value kept.
    let many = vec!["max_split_size_mb:64"; 3000].join(",");
    assert_eq!(
        AllocatorConfig::parse(&many).unwrap().max_split_size,
        Some(64 * MIB)
    );
    let list = format!(
        "roundup_power2_divisions:[{}]",
        vec!["64:8"; 3000].join(",")
    );
    let c = AllocatorConfig::parse(&list).unwrap();
    assert_eq!(c.roundup_power2_divisions[..7], [8; 7]);
    assert_eq!(c.roundup_power2_divisions[7..], [0; 9]);
}

// ---------------------------------------------------------------------------
// Settings strings: whitespace inside lists
// ---------------------------------------------------------------------------

/// C whitespace around the tokens of a list is skipped, as PyTorch's
/// `ConfigTokenizer` skips it (all 482 such strings of the run were
/// accepted by both with the same values). `[\r64\n:8  ,128:2,> :1\n]`
/// gives 8 divisions up to 64 MiB (intervals 0 to 6), 2 for
/// [64 MiB, 128 MiB) and 1 above, as PyTorch printed.
#[test]
fn whitespace_inside_lists_is_skipped_as_pytorch_skips_it() {
    let (_, a) = sim_device("expandable_segments:False", GIB);
    a.set_allocator_settings("roundup_power2_divisions:[\r64\n:8  ,128:2,> :1\n]")
        .unwrap();
    let mut want = [1u64; 16];
    want[..7].fill(8);
    want[7] = 2;
    assert_eq!(a.config().roundup_power2_divisions, want);
    for s in [
        "roundup_power2_divisions:[\n]",
        "roundup_power2_divisions:[\x0b>\t:\x0c4 ]",
        " expandable_segments_reserve_by_class:[a\t:0.5,b:2G]",
        "  expandable_segments_reserve_by_class:[\x0ba:  0.5,b:2G]\x0c",
    ] {
        a.set_allocator_settings(s)
            .unwrap_or_else(|e| panic!("{s:?}: {e}"));
    }
    // `>` alone sets every interval after the first (PyTorch printed
    // `0,4,4,…,4`).
    let c = AllocatorConfig::parse("roundup_power2_divisions:[\x0b>\t:\x0c4 ]").unwrap();
    let mut want = [4u64; 16];
    want[0] = 0;
    assert_eq!(c.roundup_power2_divisions, want);
    let c = AllocatorConfig::parse("  expandable_segments_reserve_by_class:[\x0ba:  0.5,b:2G]\x0c")
        .unwrap();
    let classes: Vec<&str> = c
        .expandable_segments_reserve_by_class
        .iter()
        .map(|(k, _)| k.as_str())
        .collect();
    assert_eq!(classes, ["a", "b"]);
    a.check_consistency().unwrap();
}

// ---------------------------------------------------------------------------
// History: a one-entry ring under a long run
// ---------------------------------------------------------------------------

/// A run of 3,000 operations with history recording into a one-entry ring
/// (`max_entries` 0, through `record_history` and `record_history_opts`,
/// with and without `state_only`, skipped actions and clears in between):
/// never more than one entry, recording never stops, the snapshot pickle
/// holds at most one trace entry, the JSON history parses, and the
/// statistics equal a recount of the snapshot after every step.
#[test]
fn a_one_entry_history_ring_survives_a_long_run() {
    for conf in ["expandable_segments:False", "expandable_segments:True"] {
        let (_, a) = sim_device(conf, 4 * GIB);
        a.record_history(Some(0));
        let mut live = Vec::new();
        let mut seed: u64 = 53;
        let mut next = |n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        for step in 0..3000 {
            match next(12) {
                0..=3 => {
                    let size = [512, 4096, MIB, 3 * MIB, 25 * MIB][next(5) as usize];
                    let stream = StreamId(next(3));
                    live.push(a.allocate_raw(size, stream).unwrap());
                }
                4..=6 if !live.is_empty() => {
                    let r = live.swap_remove(next(live.len() as u64) as usize);
                    if next(3) == 0 {
                        a.record_stream(&r, StreamId(7)).unwrap();
                    }
                    a.free_raw(r).unwrap();
                }
                7 => drop(a.snapshot()),
                8 => a.empty_cache().unwrap(),
                9 => {
                    let mut o = HistoryOptions::new(0);
                    if next(2) == 0 {
                        o = o.state_only();
                    }
                    if next(3) == 0 {
                        o = o.skip(&[Action::Alloc, Action::FreeRequested]);
                    }
                    a.record_history_opts(&o);
                }
                10 => a.clear_history(),
                _ => a.record_history(Some(0)),
            }
            assert!(a.history_enabled(), "{conf} step {step}");
            assert!(a.history().len() <= 1, "{conf} step {step}");
            if step % 250 == 0 {
                let doc = decode(&a.snapshot_pickle().unwrap());
                let traces = list(key(&doc, "device_traces"));
                assert!(list(&traces[0]).len() <= 1, "{conf} step {step}");
                serde_json::from_str::<serde_json::Value>(&a.history_json("s53")).unwrap();
            }
            a.check_consistency()
                .unwrap_or_else(|e| panic!("{conf} step {step}: {e}"));
        }
        for r in live {
            a.free_raw(r).unwrap();
        }
        a.empty_cache().unwrap();
        assert_eq!(a.memory_allocated(), 0);
        assert_eq!(a.history().len(), 1);
    }
}

// ---------------------------------------------------------------------------
// Snapshot files: a path with a NUL byte
// ---------------------------------------------------------------------------

/// A path holding a NUL byte cannot name a file: `dump_snapshot` is
/// `AllocError::Write` naming the path, creates nothing, and records no
/// `snapshot` event (a refused call leaves the history as it was); the next
/// good dump records one.
#[test]
fn a_snapshot_path_with_a_nul_byte_is_a_typed_error() {
    let (_, a) = sim_device("expandable_segments:False", GIB);
    a.record_history(Some(100));
    let x = a.allocate(MIB, S0).unwrap();
    let before = a.history();
    let dir = std::env::temp_dir().join(format!("strata-s53-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("snap\0shot.pickle");
    let e = a.dump_snapshot(&bad).unwrap_err();
    assert!(matches!(e, AllocError::Write { .. }), "{e}");
    assert_eq!(a.history(), before);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    let good = dir.join("snapshot.pickle");
    a.dump_snapshot(&good).unwrap();
    let h = a.history();
    assert_eq!(h.len(), before.len() + 1);
    assert_eq!(
        (h.last().unwrap().action, h.last().unwrap().size),
        (Action::Snapshot, MIB)
    );
    drop(x);
    std::fs::remove_dir_all(&dir).unwrap();
}
