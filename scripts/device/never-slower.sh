#!/usr/bin/env bash
# Run ON A MACHINE WITH TWO GPUS (device tool), with executables built here into carry/bin
# (hpvm-mgpu build -O3 --gpu-arch sm_90 ...):
#   bash scripts/device/never-slower.sh REPEATS CASES_FILE
# CASES_FILE: one case per line, `NAME ARGS...` (the executable carry/bin/NAME; `#` starts a
# comment). Each case runs REPEATS + 1 times on one GPU (HPVM_MGPU_DEVICES=cuda:1) and on two
# (cuda:2), the two alternating, both GPUs visible to the driver in both (so the driver's own
# start-up is the same); the first run of each is a warm-up and is left out of the medians.
# One more two-GPU run, not timed, writes the statistics (HPVM_MGPU_STATS): statistics time
# every kernel, which keeps launches from being held and graphed, so timed runs never collect
# them. The "never slower" must-hold:
# median wall on two GPUs at most 1.02x the one-GPU median, with the same output.
# Writes $OUT/never-slower.jsonl (a row per case) and $OUT/never-slower.txt; logs and
# statistics under $OUT/ns-logs/.
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out/ns-logs"
repeats=$1
cases=$2
python3 - "$repeats" "$cases" "$out" <<'PY' | tee -a "$out/never-slower.txt"
import json, os, statistics, subprocess, sys, time
repeats, cases, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]
logs = os.path.join(out, "ns-logs")

def run(name, args, gpus, tag, stats=False):
    env = dict(os.environ, HPVM_MGPU_DEVICES=f"cuda:{gpus}")
    if stats:
        env["HPVM_MGPU_STATS"] = os.path.join(logs, f"{name}.{gpus}.json")
    start = time.perf_counter()
    try:
        p = subprocess.run([f"carry/bin/{name}", *args], env=env, capture_output=True, text=True, timeout=300)
        rc, text = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        rc, text = 124, "timed out"
    wall = time.perf_counter() - start
    with open(os.path.join(logs, f"{name}.{gpus}.{tag}.log"), "w") as f:
        f.write(text)
    # The output that must agree: lines naming a checksum or a verdict, without timings.
    keep = [l for l in text.splitlines() if any(w in l for w in ("checksum", "PASS", "FAIL", "results", "Result"))]
    return rc, wall, [" ".join(w for w in l.split() if not w.replace(".", "").isdigit() or "checksum" in l) for l in keep]

for line in open(cases):
    line = line.split("#")[0].split()
    if not line:
        continue
    name, args = line[0], line[1:]
    walls = {1: [], 2: []}
    outs, rcs = {1: None, 2: None}, []
    for r in range(repeats + 1):
        for g in (1, 2):
            rc, wall, o = run(name, args, g, r)
            rcs.append(rc)
            if r > 0:
                walls[g].append(round(wall, 4))
            outs[g] = o
    run(name, args, 2, "stats", stats=True)
    row = {"program": name, "args": " ".join(args), "runs_1": walls[1], "runs_2": walls[2],
           "median_1_s": statistics.median(walls[1]), "median_2_s": statistics.median(walls[2]),
           "same_output": outs[1] == outs[2], "output": outs[2][-3:], "rcs": sorted(set(rcs))}
    row["ratio_2_over_1"] = round(row["median_2_s"] / row["median_1_s"], 3)
    try:
        s = json.load(open(os.path.join(logs, f"{name}.2.json")))
        row["stats_2"] = {k: s.get(k) for k in ("ms_session", "ms_device_setup", "gpus_opened", "ms_gpu_opening", "ms_waiting_for_gpus")}
        row["stats_2"]["split"] = {n["node"]: [n.get("partitioned_launches"), n.get("split_declined"), n.get("split_declined_because")] for n in s.get("nodes", [])}
    except Exception as e:
        row["stats_2"] = f"none: {e}"
    with open(os.path.join(out, "never-slower.jsonl"), "a") as f:
        f.write(json.dumps(row) + "\n")
    print(f"{name} {' '.join(args)}: 1 GPU {row['median_1_s']:.3f} s, 2 GPUs {row['median_2_s']:.3f} s, "
          f"ratio {row['ratio_2_over_1']}, same output {row['same_output']}, rc {row['rcs']}", flush=True)
PY
