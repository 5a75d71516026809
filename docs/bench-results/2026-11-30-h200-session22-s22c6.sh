#!/bin/bash
# Session 22, call 6 (one H200): at 0065d3a (expandable_segments_reserve), strata-alloc's GPU tests and under
# memcheck, then replays through the CUDA driver with a smaller expandable-segment reserve and with
# throw_on_cudamalloc_oom / large_segment_size_mb set (ordinary segments), under memcheck.
B=devbin/s22f
nvidia-smi --query-gpu=name,driver_version,memory.used --format=csv,noheader
timeout 60 $B/alloc_cuda --include-ignored --test-threads=4 2>&1 | grep -E "test result|FAILED|panicked"; echo "rc ${PIPESTATUS[0]}"
timeout 150 compute-sanitizer --tool memcheck --report-api-errors no $B/alloc_cuda --include-ignored --test-threads=4 2>&1 | grep -E "test result|FAILED|ERROR SUMMARY"; echo "rc ${PIPESTATUS[0]}"
for conf in "expandable_segments_reserve:0.25" "expandable_segments:False,large_segment_size_mb:40,throw_on_cudamalloc_oom:True"; do
  echo "# $conf"
  timeout 120 compute-sanitizer --tool memcheck --report-api-errors no $B/replay --device cuda --conf "$conf" --passes 3 traces/t5_varlen.default.json.gz traces/gpt_ckpt.default.json.gz 2>&1 | grep -E "ns per|memory calls by|ERROR SUMMARY|error|rror"; echo "rc ${PIPESTATUS[0]}"
done
