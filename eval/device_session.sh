#!/usr/bin/env bash
# One accelerator session's measurements, in priority order, each under its own time limit so a
# failure or a slow step costs only its own slot. Run from the repository root on the GPU
# machine with the project's dependencies importable by python3 (no install, no network):
#
#     OUT=/some/dir bash eval/device_session.sh [PART ...]
#
# PARTs, run in the order given (default: all, in this order): check (the Pallas kernel against
# the loop), bench (make bench's programs), train (REGAL and Topoformer full configs), tests
# (the Pallas identity tests compiled for the GPU), profile (stage costs of one evaluation),
# go_gdp (GDP and GO full configs), scaling (the throughput table from 100 to 10,000 ops);
# not in the default list: ab (this tree's kernels against BASELINE's, an earlier commit's
# tree carried along; see the function), ab_whole (whole evaluations against
# WHOLE_BASELINE's tree, likewise), memory (whole evaluations with the three list
# kernels at 500 ops; the list kernel with its lanes in memory against the register kernel,
# 500 to 10,000 ops), regs (the kernels' registers and spills, ptxas -v on
# the PTX XLA dumps), mid (the whole mid-size Topoformer config of issue
# #15 §3, ~2,000 steps, or MID_ARGS's; its exported model comes back as
# $OUT/topoformer_mid.tgz) and tune
# (the kernels' chunk × warps sweeps: eval.tune_kernel, list and priority at 500 ops, list at
# 2,000 ops, where the warps rule above 1,024 lanes is an untimed extrapolation), lanes (the
# list kernel with one chromosome per lane, checked, then timed against the register kernel
# at 500 ops and in whole evaluations; self-contained, ~6–9 min), lanes_scaling (the
# same at 2,000 and 10,000 ops), lanes_dynamic (SPEC §8.2's schedulers with one chromosome
# per lane, checked, then timed against their register kernel at 500 ops, D = 2; ~4–5 min)
# lanes_population (the list lane kernel from 1,024 to 65,536 chromosomes; ~3 min),
# lanes_resident (the list lane kernel with fewer programs than blocks; ~3–5 min), crossover
# (the kernels per program against the lane kernels from 512 to 4,096 chromosomes; ~5 min)
# fusion (the list and priority schedulers with and without SPEC §8.3 fusion at 500 ops,
# D = 2) and gpu_modules (the workloads as XLA GPU's modules, read by the importer).
# 2026-11-26 on an H200 (session 9): "check bench train tests", then "profile go_gdp scaling".
# 2026-11-26 on an H100 (session 13): "check tune bench profile" (333 s), then "tests go_gdp
# scaling" (299 s; tests and go_gdp ran out of their limits, raised since). The tuning made the
# kernels' defaults chunk 2 (KERNEL_CHUNK) and fewer warps (default_num_warps); since then the
# kernels' prologue ranks only the running items (ranked_slots); session 14: one
# multi-operand reduction per decision (pallas_lexmin, a lowering rule added to Pallas'
# Triton backend: if "check" fails to compile, look there first), scalar device free times in
# the list kernel, each item's first firing successors in its row. All untimed on a GPU.
# Session 15 (no GPU) added the list kernel with its lanes in memory (pallas_memory; decoder
# "pallas_memory", never "auto" until timed): check runs it too, ab and memory time it.
# Session 16 (no GPU) ranked by one int64 sort; session 17 (no GPU) made SPEC §3's memory
# walks int64 sums (the GPU path's vmapped peak_memory: one scatter and one cumsum instead of
# two each): both untimed on a GPU; "profile" shows them ("+ slot ranking", the memory walk).
# Session 18 (no GPU) put SPEC §3's memory accounting inside the memory kernel (decoder
# "pallas_fused", gsched.costmodel.pallas_peaks; never "auto" until timed): check runs it,
# memory times whole evaluations of pallas / pallas_memory / pallas_fused first.
# Session 20 (no GPU) added the list kernel with one chromosome per lane (decoder
# "pallas_lanes", gsched.costmodel.pallas_lanes: a bit-set ready tree per lane, O(log V) work
# per step instead of O(V_p); never "auto" until timed). Session 21 (no GPU) gave SPEC §8.2's
# schedulers the same layout (pallas_lanes with priority / fifo: a heap per stream per lane).
# Session 22 (no GPU): profile prints each stage's bytes per evaluation by XLA's cost analysis
# (the CPU's count puts the kernels' prologue at 1.66 MB per chromosome at 500 ops, D = 2).
# Session 24 (no GPU) compiled the stages for an H100 without one (profile_decode
# --compile-for eval/gpu_targets/h100.pbtxt: XLA GPU's launches and bytes), unrolled the
# successor tables' binary searches (4 while loops fewer) and moved the width switch around
# the prologue (built at the width that runs): pallas_lanes_fused at 500 ops, D = 2, 1.45 →
# 0.97 MB per chromosome and 90 launches per call by that count; untimed.
# Session 27 on an H200 (2026-11-28): "lanes" (179 s), then "lanes_dynamic lanes_scaling"
# (lanes_dynamic's check at D = 1, 2, 4 ran out of 180 s compiling: now D = 2, 240 s); the
# lane kernel was the fastest list kernel everywhere (1.8–1.9× whole evaluations at 500 ops,
# 58× at 10,000), so "auto" picks it for the list scheduler (docs/benchmarks.md).
# Session 28 (no GPU) moved SPEC §3's walk after the fused kernels inside their branch of the
# width switch (over 1,024 steps instead of 2,048 at 500 ops, D = 2) and dropped a copy of
# the successor table: 1,093 -> 969 kB per whole evaluation by XLA GPU's count; untimed.
# Session 29 (no GPU) gave the list lane kernel one 32-byte row per slot (its row and its
# state were two tables: two sectors per item) and loads a group of successors' words before
# their stores; untimed. Session 30 (no GPU): the lane kernels' grid may have fewer programs
# than blocks of chromosomes, each running its blocks in turn (ChromosomePerLane's programs,
# eval.tune_kernel --programs): fewer chromosomes' memory in flight; untimed.
# Session 36 on an H200 (2026-11-29; 15 min of device time in 7 calls of 27-142 s): "ab_whole"
# found this tree's whole evaluations at 0.63x of 841379c's (656,366 vs 1,025,630 evals/s at
# 500 ops, D = 2, P = 16,384); ab_whole over worktrees of the commits between bisected it to
# session 29's one-row kernel (a761a9e), which session 36 reverted (1,041,337 evals/s; 1,116,291
# at P = 65,536); lanes_resident (fewer programs) was slower at every count; §8.2's lane
# kernels timed 2.7-3.7x their register kernel in whole evaluations, so "auto" runs them.
# Session 37 on an H200 (2026-11-29; 15 min in 3 calls): "bench fusion train" (434 s; train's
# regal_full ran with --resume and stopped: no checkpoint; --overwrite since), then "go_gdp"
# (307 s), then regal_full by hand (87 s): at P = 512 the kernels with one chromosome per
# program beat the lane kernels (list 1.4-2.2x, priority 2.2-2.8x), so "auto" takes them
# below 2,048 chromosomes per call (untimed between 512 and 4,096); go_full had not logged
# its first step after 150 s (its rollouts then ran the priority + fusion lane kernel, 11-13 s
# to compile against the register kernel's 5).
# Next GPU session (the machine stays warm only ~30 s between calls: chain them at once):
# on an H100, call 1: "lanes check" (issue #16's target is an H100's: the whole evaluation at
# 500 ops, D = 2; identity of every kernel at the current defaults, D = 1, 2, 4), call 2:
# "crossover" (where "auto" should switch between the kernels per program and per lane), then
# "go_gdp" as time allows; on an H200, call 1: "crossover train" (~8 min: the switch, and
# REGAL's rate now that its ~1,200 chromosomes per generation run pallas_memory), call 2:
# "go_gdp" (GDP's and GO's start-up and rates with their ~80 chromosomes per call on the
# register kernel; their workloads are the CPU modules since session 38, not the GPU's), then
# "gpu_modules" (~2-4 min: XLA GPU's autotuned modules read by the importer, and their compile
# seconds). Later: "lanes_population profile" (whether the lane kernel's steps are
# latency- or throughput-bound), "ab" (BASELINE = a worktree of 9e5fd8d, session 13's
# kernels), "lanes_dynamic" (§8.2's lane kernels at D = 1 and 4 are untimed), "memory regs",
# "tune" and "tests"; compare timings only on the same kind of card. Carried worktrees: only
# their gsched/ without checkpoints fits the 64 MiB limit several at a time (rm -rf docs
# tests gsched/policies/*/checkpoints).
#
# Writes $OUT/log.txt (everything), $OUT/benchmarks.md (docs/benchmarks.md with the new
# sections), $OUT/brkga_b8.md and $OUT/runs.tgz (training metrics). REGAL_RUN names a run
# directory prepared on a CPU (dataset cached; see docs/benchmarks.md) to resume on the GPU.
set -u
OUT=${OUT:?set OUT}
PY=${PY:-python3}
REGAL_RUN=${REGAL_RUN:-runs/regal_full_gpu}
LOG=$OUT/log.txt
export PYTHONUNBUFFERED=1
exec > >(tee -a "$LOG") 2>&1

step() {  # step SECONDS NAME COMMAND...: run with a limit; report the exit code and time
  local limit=$1 name=$2; shift 2
  echo "=== $name (limit ${limit}s) $(date -u +%T)"
  local t0=$SECONDS
  timeout -s INT -k 5 "$limit" "$@"
  local rc=$?
  echo "=== $name: exit $rc after $((SECONDS - t0)) s"
  return $rc
}

PARTS=${*:-check bench train tests profile go_gdp scaling}
decoder_sizes=yes
memory_ok=yes
fused_ok=yes
lanes_ok=yes

check() {  # the fused Pallas kernels compiled by Triton against the loops, bit for bit
  step 150 check_decoders $PY -m eval.check_decoders --sizes 500 --devices 1,2,4 \
    --population 1024 --decoders pallas
  local list_rc=$?
  step 100 check_decoders_dynamic $PY -m eval.check_decoders --sizes 500 --devices 2 \
    --population 1024 --schedulers priority,fifo
  local dynamic_rc=$?
  if [ $list_rc != 0 ] || [ $dynamic_rc != 0 ]; then
    echo "!!! a Pallas kernel failed or differed: 'auto' falls back to the loops for the rest"
    sed -i 's/^    return lexmin_lowers()$/    return False/' gsched/costmodel/pallas_decode.py
    decoder_sizes=''
  fi
  # The list kernel with its lanes in memory, without and with the memory accounted inside
  # it (decoders "pallas_memory", "pallas_fused"; "auto" picks the first below
  # LANES_MIN_CHROMOSOMES: if it fails, the register kernel there; "auto" never picks the
  # second, so its failure only skips its timings; "memory" checks the first at 2,000 and
  # 10,000 ops against the register kernel)
  step 120 check_memory $PY -m eval.check_decoders --sizes 500 --devices 1,2,4 \
    --population 1024 --decoders pallas_memory || memory_failed
  step 120 check_fused $PY -m eval.check_decoders --sizes 500 --devices 1,2,4 \
    --population 1024 --decoders pallas_fused || fused_ok=''
  step 150 check_lanes $PY -m eval.check_decoders --sizes 500 --devices 1,2,4 \
    --population 1024 --decoders pallas_lanes,pallas_lanes_fused && lanes_ok=checked \
    || lanes_failed
}

memory_failed() {  # "auto" picks pallas_memory with few chromosomes: the register kernel
  memory_ok=''
  echo "!!! the memory kernel failed or differed: 'auto' runs the register kernel for the rest"
  sed -i 's/^LIST_PER_PROGRAM = "pallas_memory"$/LIST_PER_PROGRAM = "pallas"/' \
    gsched/costmodel/evaluate.py
}

lanes_failed() {  # "auto" picks pallas_lanes for every scheduler: the register kernels instead
  lanes_ok=''
  echo "!!! a lane kernel failed or differed: 'auto' runs the register kernels for the rest"
  sed -i 's/^    return "pallas_lanes"$/    return "pallas"/' gsched/costmodel/evaluate.py
}

lanes() {  # the list kernel with one chromosome per lane (pallas_lanes, what "auto" runs for
  # the list scheduler, and accounting SPEC §3 inside, pallas_lanes_fused) checked against the
  # loop, then against the register kernel: schedule alone at 500 ops, D = 2 (chunk and warps:
  # 32 chromosomes per warp), at P = 65,536 (more threads in flight), and whole evaluations
  # (the decoders table: the loop and every GPU kernel, with the memory walk where they leave
  # it)
  [ "$lanes_ok" = checked ] || step 150 check_lanes $PY -m eval.check_decoders --sizes 500 \
    --devices 1,2,4 --population 1024 --decoders pallas_lanes,pallas_lanes_fused || lanes_failed
  [ -n "$lanes_ok" ] || { echo "!!! lanes: the kernel failed or differed, timings skipped"; \
    return 1; }
  lanes_ok=checked
  [ -f "$OUT/benchmarks.md" ] || cp docs/benchmarks.md "$OUT/benchmarks.md"
  step 120 lanes_500 $PY -m eval.tune_kernel --size 500 --devices 2 --states registers,lanes \
    --chunks 1,2 --warps 0,2 --population 16384 --repeats 3 --output "$OUT/benchmarks.md" \
    --section-title "Fused list kernels, per program or per lane, 500 ops, D = 2 — GPU"
  step 60 lanes_500_large $PY -m eval.tune_kernel --size 500 --devices 2 \
    --states registers,lanes --chunks 2 --warps 0 --population 65536 --repeats 3 \
    --output "$OUT/benchmarks.md" \
    --section-title "List kernels, per program or per lane, 500 ops, D = 2, P = 65,536 — GPU"
  step 150 lanes_whole_500 $PY -m eval.bench_cost_model --sizes 500 --devices 2 --repeats 3 \
    --chunks '' --sweep-populations '' --batch-graphs 0 --schedulers '' --decoder-sizes 500 \
    --decoder-devices 2 --decoder-population 16384 --output "$OUT/benchmarks.md" \
    --section-title "Whole evaluations, the list kernels, 500 ops, D = 2 — GPU"
}

lanes_dynamic() {  # SPEC §8.2's schedulers with one chromosome per lane (pallas_lanes with
  # priority / fifo: a heap per stream per lane; pallas_lanes_fused accounting SPEC §3 inside
  # too; what "auto" runs since session 36) checked against the loop, then timed against the
  # register kernel, schedule alone, 500 ops, D = 2; "profile" has their whole evaluations
  step 240 check_lanes_dynamic $PY -m eval.check_decoders --sizes 500 --devices 2 \
    --population 512 --decoders pallas_lanes,pallas_lanes_fused --schedulers priority,fifo \
    || { echo "!!! lanes_dynamic: the kernel failed or differed, timings skipped"; \
    lanes_failed; return 1; }
  [ -f "$OUT/benchmarks.md" ] || cp docs/benchmarks.md "$OUT/benchmarks.md"
  local scheduler
  for scheduler in priority fifo; do
    step 90 "lanes_$scheduler" $PY -m eval.tune_kernel --size 500 --devices 2 \
      --scheduler $scheduler --states registers,lanes --chunks 2 --warps 0 --population 16384 \
      --repeats 3 --output "$OUT/benchmarks.md" \
      --section-title "$scheduler kernels, per program or per lane, 500 ops, D = 2 — GPU"
  done
}

lanes_scaling() {  # the two list kernels, schedule alone, where the register kernel is
  # O(V_p^2) per chromosome and spills (after "lanes", which checks the lane kernels)
  [ -n "$lanes_ok" ] || { echo "!!! lanes_scaling: the lane kernels failed, skipped"; return 1; }
  [ -f "$OUT/benchmarks.md" ] || cp docs/benchmarks.md "$OUT/benchmarks.md"
  step 90 lanes_2000 $PY -m eval.tune_kernel --size 2000 --devices 2 --states registers,lanes \
    --chunks 2 --warps 0 --population 2048 --repeats 2 --output "$OUT/benchmarks.md" \
    --section-title "Fused list kernels, per program or per lane, 2,000 ops, D = 2 — GPU"
  step 120 lanes_10000 $PY -m eval.tune_kernel --size 10000 --devices 2 \
    --states registers,lanes --chunks 2 --warps 0 --population 512 --repeats 2 \
    --output "$OUT/benchmarks.md" \
    --section-title "Fused list kernels, per program or per lane, 10,000 ops, D = 2 — GPU"
}

bench() {  # make bench's two programs on a reduced grid, into a copy of the doc
  [ -f "$OUT/benchmarks.md" ] || cp docs/benchmarks.md "$OUT/benchmarks.md"
  step 180 bench_cost_model $PY -m eval.bench_cost_model --sizes 500 --devices 1,2 --repeats 3 \
    --chunks '' --sweep-populations 4096,65536 --batch-graphs 8 --schedulers priority --no-fusion \
    --decoder-sizes "${decoder_sizes:+500}" --decoder-devices 1,2 --output "$OUT/benchmarks.md"
  step 90 bench_brkga_large $PY -m eval.bench_brkga --sizes 200,500 --batch 256 --repeats 1 \
    --output "$OUT/benchmarks.md"
  step 60 bench_cost_model_2000 $PY -m eval.bench_cost_model --sizes 2000 --devices 2 \
    --repeats 2 --chunks '' --sweep-populations '' --batch-graphs 0 --schedulers '' \
    --decoder-sizes "${decoder_sizes:+2000}" --decoder-devices 2 --output "$OUT/benchmarks.md" \
    --section-title "Cost-model throughput at 2,000 ops — GPU"
  step 35 bench_brkga_b8 $PY -m eval.bench_brkga --sizes 500 --batch 8 --repeats 1 \
    --output "$OUT/brkga_b8.md"
}

fusion() {  # SPEC §8.3 fusion (GO's default, with priority) at 500 ops, D = 2: the list and
  # priority schedulers with and without it ("bench" runs --no-fusion; never timed on a GPU)
  [ -f "$OUT/benchmarks.md" ] || cp docs/benchmarks.md "$OUT/benchmarks.md"
  step 150 bench_fusion $PY -m eval.bench_cost_model --sizes 500 --devices 2 --repeats 3 \
    --chunks '' --sweep-populations '' --batch-graphs 0 --schedulers list,priority \
    --decoder-sizes '' --output "$OUT/benchmarks.md" \
    --section-title "Cost-model throughput with fusion, 500 ops, D = 2 — GPU"
}

train() {  # the paper-scale configs as far as the time allows (step rate, first metrics)
  step 70 regal_full $PY -m train.regal --config train/configs/regal_full.toml \
    --run-dir "$REGAL_RUN" --overwrite steps=100000 data.num_graphs=48 data.max_valid=8 \
    log_every=5
  step 70 topoformer_full $PY -m train.topoformer --config train/configs/topoformer_full.toml \
    --run-dir runs/topoformer_full_gpu --overwrite data.val_graphs=8 log_every=5
}

tests() {  # the interpret-mode identity tests, compiled for the GPU this time, at XLA's default
  # optimization level (tests/conftest.py lowers it unless XLA_FLAGS names one)
  XLA_FLAGS="--xla_backend_optimization_level=3" step 240 pallas_tests $PY -m pytest -q -x \
    -p no:cacheprovider -W ignore::DeprecationWarning \
    tests/test_pallas_decode.py
}

profile() {
  step 90 profile_500 $PY -m eval.profile_decode --sizes 500 --devices 1,2,4 --population 16384
  step 50 profile_2000 $PY -m eval.profile_decode --sizes 2000 --devices 1,2 --population 2048
  step 70 profile_priority $PY -m eval.profile_decode --sizes 500 --devices 2 --population 4096 \
    --scheduler priority
}

gpu_modules() {  # the workloads compiled for this GPU, autotuned (import_jax(...,
  # backend="gpu")), against the CPU modules the HLO level imports by default: XLA's compile
  # seconds (part of GO's and GDP's GPU start-up before session 38), the library calls the
  # importer reads, any custom call it does not; never run on a GPU; ~2-4 min
  [ -f "$OUT/benchmarks.md" ] || cp docs/benchmarks.md "$OUT/benchmarks.md"
  step 300 gpu_modules $PY -m eval.gpu_modules --backend gpu --output "$OUT/benchmarks.md" \
    --section-title "XLA GPU's modules of the workloads against the CPU's — GPU"
}

go_gdp() {
  step 150 gdp_full $PY -m train.gdp --config train/configs/gdp_full.toml \
    --run-dir runs/gdp_full_gpu --overwrite log_every=1
  step 150 go_full $PY -m train.go --config train/configs/go_full.toml \
    --run-dir runs/go_full_gpu --overwrite log_every=1
}

scaling() {
  [ -f "$OUT/benchmarks.md" ] || cp docs/benchmarks.md "$OUT/benchmarks.md"
  step 90 bench_scaling $PY -m eval.bench_cost_model --sizes 100,2000 --devices 1,2,4 \
    --repeats 2 --chunks '' --sweep-populations '' --batch-graphs 0 --schedulers '' \
    --decoder-sizes '' --output "$OUT/benchmarks.md" \
    --section-title "Cost-model throughput from 100 to 2,000 ops — GPU"
  step 90 bench_10000 $PY -m eval.bench_cost_model --sizes 10000 --devices 1,2 --repeats 1 \
    --chunks '' --sweep-populations '' --batch-graphs 0 --schedulers '' --decoder-sizes '' \
    --output "$OUT/benchmarks.md" --section-title "Cost-model throughput at 10,000 ops — GPU"
}

tune() {  # the kernels' two knobs at 500 ops, D = 2 (list, then priority), then at 2,000 ops:
  # successor entries per inner iteration (chunk; default 2 since the H100's tuning) and Triton
  # warps per program (0: default_num_warps); every variant checked identical to the first
  [ -f "$OUT/benchmarks.md" ] || cp docs/benchmarks.md "$OUT/benchmarks.md"
  step 240 tune_kernel $PY -m eval.tune_kernel --size 500 --devices 2 --chunks 1,2,4,8 \
    --warps 0,1,2,8 --population 16384 --repeats 3 --output "$OUT/benchmarks.md" \
    --section-title "Fused-kernel tuning, 500 ops, D = 2 — GPU"
  step 120 tune_kernel_priority $PY -m eval.tune_kernel --size 500 --devices 2 \
    --scheduler priority --chunks 1,2,8 --warps 0,1,2 --population 4096 --repeats 3 \
    --output "$OUT/benchmarks.md" \
    --section-title "Fused-kernel tuning, priority, 500 ops, D = 2 — GPU"
  step 120 tune_kernel_2000 $PY -m eval.tune_kernel --size 2000 --devices 2 --chunks 2,8 \
    --warps 0,2,4,8 --population 2048 --repeats 3 --output "$OUT/benchmarks.md" \
    --section-title "Fused-kernel tuning, 2,000 ops, D = 2 — GPU"
}

lanes_population() {  # the list lane kernel's schedule alone at 500 ops, D = 2 from 1,024 to
  # 65,536 chromosomes (32 to 2,048 one-warp programs): flat time per call while the SMs fill
  # means a step waits on latency; time growing with P, that the steps share a limit (memory
  # sectors, TLB reach): which of the two decides what a kernel change can gain
  [ -n "$lanes_ok" ] || { echo "!!! lanes_population: the lane kernel failed, skipped"; \
    return 1; }
  [ -f "$OUT/benchmarks.md" ] || cp docs/benchmarks.md "$OUT/benchmarks.md"
  local p
  for p in 1024 4096 16384 65536; do
    step 60 "lanes_population $p" $PY -m eval.tune_kernel --size 500 --devices 2 \
      --states lanes --chunks 2 --warps 0 --population "$p" --repeats 5 \
      --output "$OUT/benchmarks.md" \
      --section-title "The list lane kernel, 500 ops, D = 2, P = $p — GPU"
  done
}

lanes_resident() {  # the list lane kernel's schedule alone at 500 ops, D = 2 with fewer
  # programs than blocks of 32 chromosomes, each running its blocks in turn (--programs; 0: one
  # per block, 512 at 16,384, 2,048 at 65,536): at ~40 KiB per chromosome, 33 programs keep
  # ~1,300 chromosomes' memory in flight, what a 50 MB L2 holds; 132 and 264, one and two per
  # SM. Faster with fewer programs: the steps wait on HBM's scattered sectors, and a default
  # below all blocks at once should follow; slower: they wait on latency, keep the default
  [ -n "$lanes_ok" ] || { echo "!!! lanes_resident: the lane kernel failed, skipped"; \
    return 1; }
  [ -f "$OUT/benchmarks.md" ] || cp docs/benchmarks.md "$OUT/benchmarks.md"
  step 150 "lanes_resident 16384" $PY -m eval.tune_kernel --size 500 --devices 2 \
    --states lanes --chunks 2 --warps 0 --programs 0,264,132,66,33 --population 16384 \
    --repeats 3 --output "$OUT/benchmarks.md" \
    --section-title "The list lane kernel's programs, 500 ops, D = 2, P = 16,384 — GPU"
  step 150 "lanes_resident 65536" $PY -m eval.tune_kernel --size 500 --devices 2 \
    --states lanes --chunks 2 --warps 0 --programs 0,528,132,33 --population 65536 \
    --repeats 3 --output "$OUT/benchmarks.md" \
    --section-title "The list lane kernel's programs, 500 ops, D = 2, P = 65,536 — GPU"
}

crossover() {  # whole evaluations of the kernels with one chromosome per program against
  # the lane kernels at 500 ops, D = 2, from 512 to 4,096 chromosomes per call (list: register,
  # memory and lane kernels; priority: register and lane kernels), then BRKGA at B = 8 (~600
  # chromosomes per generation): where "auto" should switch (evaluate.LANES_MIN_CHROMOSOMES,
  # 2,048 since session 37, between the 512 and 4,096 it was timed at); ~5 min
  [ -f "$OUT/benchmarks.md" ] || cp docs/benchmarks.md "$OUT/benchmarks.md"
  local p
  for p in 512 1024 2048 4096; do
    step 60 "crossover list $p" $PY -m eval.tune_kernel --whole --size 500 --devices 2 \
      --states registers,memory,lanes --chunks 2 --warps 0 --population "$p" --repeats 5 \
      --output "$OUT/benchmarks.md" \
      --section-title "List whole evaluations by kernel, 500 ops, D = 2, P = $p — GPU"
    step 60 "crossover priority $p" $PY -m eval.tune_kernel --whole --scheduler priority \
      --size 500 --devices 2 --states registers,lanes --chunks 2 --warps 0 --population "$p" \
      --repeats 5 --output "$OUT/benchmarks.md" \
      --section-title "Priority whole evaluations by kernel, 500 ops, D = 2, P = $p — GPU"
  done
  step 35 crossover_brkga_b8 $PY -m eval.bench_brkga --sizes 500 --batch 8 --repeats 1 \
    --output "$OUT/brkga_b8.md"
}

ab() {  # this tree's kernels against an earlier commit's, on the same card in the same call:
  # BASELINE (default baseline/, git-ignored) holds that commit's tree, made on the CPU with
  # `git worktree add baseline <commit>` and sent with the run tool's carry=["baseline"].
  # Schedule alone (eval.tune_kernel), 500 ops, D = 2, chunk 2, default warps, list and
  # priority; baseline, this tree (its list kernel with the lanes in registers and in memory),
  # baseline again (the load drifts).
  local base=${BASELINE:-baseline}
  [ -d "$base/gsched" ] || { echo "!!! ab: no tree at $base"; return 1; }
  local tree states
  for tree in "$base" . "$base"; do
    states=$([ "$tree" = . ] && [ -n "$memory_ok" ] && echo "--states registers,memory")
    [ "$tree" = . ] && [ -n "$states" ] && [ -n "$lanes_ok" ] && states="$states,lanes"
    (cd "$tree" && step 90 "ab_list ${tree}" $PY -m eval.tune_kernel --size 500 --devices 2 \
      --chunks 2 --warps 0 --population 16384 --repeats 3 --output "$OUT/ab.md" $states \
      --section-title "A/B list, $([ "$tree" = . ] && echo this tree || echo baseline)")
    (cd "$tree" && step 60 "ab_priority ${tree}" $PY -m eval.tune_kernel --size 500 \
      --devices 2 --scheduler priority --chunks 2 --warps 0 --population 4096 --repeats 3 \
      --output "$OUT/ab.md" \
      --section-title "A/B priority, $([ "$tree" = . ] && echo this tree || echo baseline)")
  done
}

ab_whole() {  # whole evaluations (evaluate_with_decoder) of this tree against earlier
  # commits', interleaved by tree: each of WHOLE_BASELINES (default "baseline_rows", a
  # git-ignored worktree sent with carry=[...]: `git worktree add baseline_rows 841379c`, the
  # lane kernel before session 29's rows, 1.00-1.03 M evals/s on an H200), then this tree,
  # then the baselines again; the lane kernel at 500 ops, D = 2, P = 16,384. Every tree runs
  # this tree's eval/tune_kernel.py --whole (run as a file: its imports come from the tree run)
  local here=$PWD base trees=()
  for base in ${WHOLE_BASELINES:-baseline_rows}; do
    if [ -d "$base/gsched" ]; then trees+=("$base"); else echo "!!! ab_whole: no tree at $base"; fi
  done
  [ -n "$lanes_ok" ] || { echo "!!! ab_whole: the lane kernel failed its check"; return 1; }
  local tree
  for tree in "${trees[@]}" . "${trees[@]}"; do
    local title="A/B whole evaluations, $([ "$tree" = . ] && echo this tree || echo "$tree")"
    (cd "$tree" && export PYTHONPATH=. && step 120 "ab_whole ${tree}" $PY \
      "$here/eval/tune_kernel.py" --whole --size 500 --devices 2 --states lanes --chunks 2 \
      --warps 0 --population 16384 --repeats 5 --output "$OUT/ab.md" --section-title "$title")
  done
}

memory() {  # the list kernel with its lanes in memory against the register kernel, schedule
  # alone, interleaved: its knobs at 500 ops, D = 2 (one warp is its default: its vectors are
  # ~sqrt(V_p) lanes), then the two kernels at 2,000 and 10,000 ops, where the register kernel
  # is O(V_p^2) per chromosome and spills
  [ -n "$memory_ok" ] || { echo "!!! memory: check_memory failed, skipped"; return 1; }
  [ -f "$OUT/benchmarks.md" ] || cp docs/benchmarks.md "$OUT/benchmarks.md"
  # Whole evaluations (schedule and SPEC §3's memory), interleaved and checked identical: the
  # register kernel, the memory kernel, each with the memory walk after it, and the memory
  # kernel accounting the memory itself (pallas_fused, when check_fused passed)
  [ -n "$fused_ok" ] || echo "!!! check_fused failed: its timings are not meaningful"
  step 150 memory_whole_500 $PY -m eval.bench_cost_model --sizes 500 --devices 2 --repeats 3 \
    --chunks '' --sweep-populations '' --batch-graphs 0 --schedulers '' --decoder-sizes 500 \
    --decoder-devices 2 --decoder-population 16384 --output "$OUT/benchmarks.md" \
    --section-title "Whole evaluations, three list kernels, 500 ops, D = 2 — GPU"
  step 150 memory_500 $PY -m eval.tune_kernel --size 500 --devices 2 --states registers,memory \
    --chunks 1,2,4 --warps 0,2 --population 16384 --repeats 3 --output "$OUT/benchmarks.md" \
    --section-title "Fused list kernels, lanes in registers or memory, 500 ops, D = 2 — GPU"
  step 90 memory_2000 $PY -m eval.tune_kernel --size 2000 --devices 2 \
    --states registers,memory --chunks 2 --warps 0 --population 2048 --repeats 2 \
    --output "$OUT/benchmarks.md" \
    --section-title "Fused list kernels, lanes in registers or memory, 2,000 ops, D = 2 — GPU"
  step 120 memory_10000 $PY -m eval.tune_kernel --size 10000 --devices 2 \
    --states registers,memory --chunks 2 --warps 0 --population 512 --repeats 2 \
    --output "$OUT/benchmarks.md" \
    --section-title "Fused list kernels, lanes in registers or memory, 10,000 ops, D = 2 — GPU"
}

regs() {  # registers and spills per thread of the fused kernels (occupancy: 65,536 registers
  # per SM) as XLA's own Triton compiles them: XLA dumps the PTX (the Triton kernels are in
  # it), ptxas -v reads it; to set beside eval.kernel_registers' CPU-side estimate (pip
  # triton). A small population: only the compiled code matters.
  local dump=$OUT/xla_dump
  XLA_FLAGS="--xla_dump_to=$dump" step 120 regs_compile $PY -m eval.tune_kernel --size 500 \
    --devices 2 --states registers,memory,lanes --chunks 2 --warps 0 --population 64 --repeats 1
  XLA_FLAGS="--xla_dump_to=$dump/priority" step 120 regs_compile_priority $PY \
    -m eval.tune_kernel --size 500 --devices 2 --scheduler priority --chunks 2 --warps 0 \
    --population 64 --repeats 1
  XLA_FLAGS="--xla_dump_to=$dump/fused" step 120 regs_compile_fused $PY -m eval.check_decoders \
    --sizes 500 --devices 2 --population 64 --decoders pallas_fused
  local ptxas
  ptxas=$(command -v ptxas || $PY -c "import nvidia.cuda_nvcc as m, os; \
print(os.path.join(os.path.dirname(m.__file__), 'bin', 'ptxas'))" 2>/dev/null)
  [ -x "$ptxas" ] || ptxas=$(timeout 60 find / -name ptxas -type f 2>/dev/null | head -1)
  echo "ptxas: ${ptxas:-none found}"
  local f n=0 files
  files=$(grep -l "gsched" -r "$dump" --include='*.ptx' 2>/dev/null)
  echo "PTX files with the kernels: $(echo $files | wc -w)"
  for f in $files; do
    n=$((n + 1))
    echo "--- $f"
    [ -x "$ptxas" ] || continue
    "$ptxas" -arch=sm_90 -v "$f" -o /dev/null > "$OUT/ptxas_$n.txt" 2>&1
    grep -A4 "entry function '[^']*gsched" "$OUT/ptxas_$n.txt"
  done
  [ -n "$files" ] && tar czf "$OUT/kernels_ptx.tgz" $files
  rm -rf "$dump"
}

mid() {  # at the H200's ~10 steps/s of the larger full config, a few minutes. MID_ARGS: config
  # overrides, e.g. MID_ARGS="steps=6000 reinforce.learning_rate=1e-4" (the CPU run plateaued
  # at 1.2 % behind XLA's default by step 850 of 2,000; the paper trains 40,750 steps at 1e-4);
  # MID_LIMIT: seconds (an interrupted run exports nothing: size the steps to the limit)
  step "${MID_LIMIT:-420}" topoformer_mid $PY -m train.topoformer \
    --config train/configs/topoformer_mid.toml --run-dir runs/topoformer_mid_gpu --overwrite \
    ${MID_ARGS:-}
  tar czf "$OUT/topoformer_mid.tgz" runs/topoformer_mid_gpu/model runs/topoformer_mid_gpu/metrics.jsonl
}

nvidia-smi -L
$PY -c "import jax, jaxlib, equinox, optax, orbax.checkpoint, numpy; print('jax', jax.__version__, \
'jaxlib', jaxlib.__version__, 'equinox', equinox.__version__, 'optax', optax.__version__, \
'numpy', numpy.__version__, jax.devices())"

for part in $PARTS; do $part; done
tar czf "$OUT/runs.tgz" runs/*/metrics.jsonl 2>/dev/null
echo "=== done $(date -u +%T)"
