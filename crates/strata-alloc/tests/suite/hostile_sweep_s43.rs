//! Session 43's sweep of hostile inputs to strata-alloc's public API (after
//! `hostile_sweep_s41.rs`). No defect was found in strata-alloc; these tests
//! pin what was checked.
//!
//! * Allocator configuration strings against PyTorch 2.15's own parser
//!   (`torch._C._accelerator_setAllocatorSettings`, the shared
//!   `AcceleratorAllocatorConfig` of a CPU build): every string below is
//!   accepted or refused by both. Where PyTorch's `stoull` accepts a
//!   malformed number (`max_split_size_mb:-1` wraps to the largest value,
//!   `20.5` is read as 20; `1e3` is read as 1 and refused as too small) or
//!   an invalid entry makes it warn and keep the previous value, strata
//!   refuses the string with a typed error naming the key
//!   (docs/allocator.md, "Keys"; `hostile_inputs.rs`, `hostile_inputs_2.rs`),
//!   and a refused `set_allocator_settings` changes nothing.
//! * Memory metadata holding quotes, backslashes, newlines, NUL, markup and
//!   non-ASCII text: recorded as given, and `history_json` stays valid JSON
//!   and `snapshot_pickle` a valid pickle that holds it.
//! * The property tests of `allocator.rs`, `failed_calls_change_nothing.rs`,
//!   `mempool.rs` and `near_capacity.rs` with `PROPTEST_CASES=5000` in a
//!   debug build (overflow checks on), `PROPTEST_RNG_SEED` 1, 2 and 3: all
//!   pass.
//!
//! Examined and left: a `RawAllocation` is `Copy` and its block's
//! generation is a `u32`, so a handle kept after its free could pass the
//! liveness check again once the same block slot has been handed out 2^32
//! more times (about six minutes of a tight allocate/free loop on one
//! size); every shorter use of a stale handle is `AllocError::InvalidFree`.

use crate::common::{decode, key, list, sim, state, string};
use strata_alloc::{AllocError, AllocatorConfig, StreamId};

/// Each string and whether PyTorch 2.15's parser accepts it
/// (`torch._C._accelerator_setAllocatorSettings(s)` raising or not).
const CONFIGS: &[(&str, bool)] = &[
    ("max_split_size_mb:18446744073709551615", true),
    ("max_split_size_mb:17592186044416", true),
    ("max_split_size_mb:17592186044415", true),
    ("max_split_size_mb:0", false),
    ("max_split_size_mb:1", false),
    ("garbage_collection_threshold:0.5", true),
    ("garbage_collection_threshold:1", false),
    ("garbage_collection_threshold:0", false),
    ("garbage_collection_threshold:nan", false),
    ("garbage_collection_threshold:1e-300", true),
    ("roundup_power2_divisions:4", true),
    ("roundup_power2_divisions:3", false),
    ("roundup_power2_divisions:0", false),
    ("roundup_power2_divisions:[256:4,>:8]", true),
    ("roundup_power2_divisions:[>:8,256:4]", true),
    ("roundup_power2_divisions:[1:4]", true),
    ("roundup_power2_divisions:[256:4,256:8]", true),
    ("roundup_power2_divisions:[]", true),
    ("roundup_power2_divisions:[256:4,]", true),
    (
        "roundup_power2_divisions:[64:8,128:2,256:2,512:2,1024:1,>:1]",
        true,
    ),
    ("roundup_power2_divisions:[18446744073709551615:2]", false),
    ("roundup_power2_divisions:[64:1024]", true),
    ("roundup_power2_divisions:[64:2048]", true),
    ("expandable_segments:True", true),
    ("expandable_segments:true", false),
    ("expandable_segments:1", false),
    ("expandable_segments:False,expandable_segments:True", true),
    (",", false),
    ("", true),
    (" ", true),
    ("max_split_size_mb : 20", true),
    ("max_split_size_mb:20,,", false),
    ("unknown_key:1", false),
    // PyTorch: "i < config_.size() INTERNAL ASSERT FAILED".
    ("max_split_size_mb:", false),
    (":20", false),
    ("max_split_size_mb:20:30", false),
    ("pinned_num_register_threads:1024", false),
    ("pinned_num_register_threads:3", false),
    ("pinned_num_register_threads:0", false),
    ("pinned_num_register_threads:2048", false),
    ("pinned_use_background_threads:True", true),
    ("max_non_split_rounding_mb:18446744073709551615", true),
    // An Arabic-Indic digit three: PyTorch's stoull throws.
    ("max_split_size_mb:\u{663}", false),
];

#[test]
fn configuration_strings_are_accepted_or_refused_as_pytorch_parses_them() {
    for &(s, accepted) in CONFIGS {
        let parsed = AllocatorConfig::parse(s);
        assert_eq!(parsed.is_ok(), accepted, "{s:?}: {parsed:?}");
        let a = sim("expandable_segments:True,max_split_size_mb:64");
        let keep = a.allocate(3 << 20, StreamId::DEFAULT).unwrap();
        let before = state(&a);
        let r = a.set_allocator_settings(s);
        assert_eq!(r.is_ok(), accepted, "{s:?}: {r:?}");
        if let Err(e) = r {
            assert!(matches!(e, AllocError::Config(_)), "{s:?}: {e:?}");
            assert_eq!(
                state(&a),
                before,
                "{s:?}: a refused string changed the allocator"
            );
        }
        drop(keep);
        a.check_consistency().unwrap();
    }
}

#[test]
fn hostile_memory_metadata_survives_the_history_json_and_the_pickle() {
    let weird = "a\"b'c\\d\ne\r\t\u{0}f</script><b>&amp; é 漢字 \u{1F600}";
    let a = sim("");
    a.record_history(Some(100));
    a.set_memory_metadata(weird);
    assert_eq!(a.memory_metadata(), weird);
    let x = a.allocate(4096, StreamId::DEFAULT).unwrap();
    drop(x);
    a.set_memory_metadata("");
    let h = a.history();
    assert!(!h.is_empty());
    assert!(h.iter().all(|e| e.user_metadata.as_deref() == Some(weird)));
    // The trace document stays JSON, whatever the workload's name.
    let json = a.history_json(weird);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["workload"], weird);
    // The snapshot pickle holds the metadata as given.
    let snap = decode(&a.snapshot_pickle().unwrap());
    let traces = list(key(&snap, "device_traces"));
    let found = traces
        .iter()
        .flat_map(|t| list(t).iter())
        .filter(|e| string(key(e, "user_metadata")) == weird)
        .count();
    assert_eq!(found, h.len());
}
