#!/bin/bash
# Records allocation traces (shared/traces format) of the workloads in benches/anchors/workloads/ that
# traces/README.md does not list yet, in both allocator modes, each mode in a fresh process.
#   bash record_new_traces.sh DIR OUTDIR [NAME...]      (no NAME: all eight)
# DIR holds record_trace.py and the workload scripts (benches/anchors/ has record_trace.py and workloads/;
# a flat folder with all of them works too). Each trace is OUTDIR/NAME.MODE.json.gz; record_trace.py's one-line
# summary is printed per trace (full output in OUTDIR/logs/NAME.MODE.log), and a failing or timed-out
# workload (timeout 150 s per process) is reported and skipped.
DIR=${1:?usage: record_new_traces.sh DIR OUTDIR}; OUTDIR=${2:?usage: record_new_traces.sh DIR OUTDIR}
mkdir -p "$OUTDIR/logs"
rec() { n=$1; s=$DIR/workloads/$n.py; [ -f "$s" ] || s=$DIR/$n.py
  for m in default expandable; do
    if [ $m = expandable ]; then export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True; else unset PYTORCH_CUDA_ALLOC_CONF; fi
    log=$OUTDIR/logs/$n.$m.log
    timeout 150 python3 "$DIR/record_trace.py" "$OUTDIR/$n.$m.json.gz" $n $m "$s" > "$log" 2>&1
    rc=$?; if [ $rc = 0 ]; then grep "^$n\.$m: " "$log" | tail -1
    else echo "$n.$m: FAILED (exit $rc$([ $rc = 124 ] && echo ', timed out'))"; tail -3 "$log" | sed 's/^/    /'; fi
  done; unset PYTORCH_CUDA_ALLOC_CONF; }
shift 2
for n in ${@:-vit_train t5_varlen unet_diffusion hf_llama_generate bert_finetune_accum gnn_varsize resnet_amp_scaler moe_train}; do
  rec $n
done
ls -la "$OUTDIR"
