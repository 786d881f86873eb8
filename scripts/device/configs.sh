#!/usr/bin/env bash
# Run ON A GPU MACHINE (device tool), with executables built here into carry/bin:
#   bash scripts/device/configs.sh REPEATS CASES_FILE CONFIGS_FILE
# The same programs under several settings, interleaved so that drift on the machine falls on
# every setting alike. CASES_FILE: one case per line, `NAME ARGS...` (carry/bin/NAME).
# CONFIGS_FILE: one setting per line, `LABEL VAR=VALUE...` (`#` starts a comment in both),
# e.g. `one HPVM_MGPU_DEVICES=cuda:1` and `two-start HPVM_MGPU_DEVICES=cuda:2
# HPVM_MGPU_OPEN=start`. Each case runs REPEATS + 1 times per setting, settings alternating;
# the first round is a warm-up left out of the medians. Kept per run: wall seconds, the
# program's own `kernel_ms` (or `ms`) figure where it prints one, and its checksum or verdict
# lines, which must agree across settings. One more run per setting, untimed, writes the
# statistics (HPVM_MGPU_STATS), summarised beside the rows.
# Writes $OUT/configs.jsonl (a row per case and setting) and $OUT/configs.txt.
set -u
out=${OUT:-/tmp/out}
mkdir -p "$out/configs-logs"
python3 - "$1" "$2" "$3" "$out" <<'PY' | tee -a "$out/configs.txt"
import json, os, re, statistics, subprocess, sys, time
repeats, cases, configs, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
logs = os.path.join(out, "configs-logs")

def lines(path):
    for line in open(path):
        line = line.split("#")[0].split()
        if line:
            yield line[0], line[1:]

settings = [(label, dict(kv.split("=", 1) for kv in kvs)) for label, kvs in lines(configs)]

def run(name, args, env_extra, stats=None):
    env = dict(os.environ, **env_extra)
    if stats:
        env["HPVM_MGPU_STATS"] = stats
    start = time.perf_counter()
    try:
        p = subprocess.run([f"carry/bin/{name}", *args], env=env, capture_output=True, text=True, timeout=300)
        rc, text = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        rc, text = 124, "timed out"
    wall = time.perf_counter() - start
    m = re.search(r"kernel_ms[ =:]+([0-9.]+)", text) or re.search(r"\bms[ =:]+([0-9.]+)", text)
    verdict = [l for l in text.splitlines() if any(w in l for w in ("checksum", "PASS", "FAIL"))]
    verdict = [re.sub(r"kernel_ms[ =:]+[0-9.]+", "", l).strip() for l in verdict]
    return rc, wall, (float(m.group(1)) if m else None), verdict, text

def summary(path):
    try:
        d = json.load(open(path))
    except Exception:
        return None
    keep = {k: d.get(k) for k in ("ms_device_setup", "gpus_opened", "ms_gpu_opening", "ms_waiting_for_gpus", "ms_first_launch")}
    keep["nodes"] = {n["node"]: [n["unit_launches"], n["partitioned_launches"], n["max_devices"]]
                     for n in d.get("nodes", []) if n.get("unit_launches")}
    return keep

for name, args in lines(cases):
    walls = {l: [] for l, _ in settings}
    kms = {l: [] for l, _ in settings}
    verdicts, rcs = {}, {l: set() for l, _ in settings}
    for r in range(repeats + 1):
        for label, env in settings:
            rc, wall, k, verdict, text = run(name, args, env)
            rcs[label].add(rc)
            verdicts[label] = verdict
            if r > 0:
                walls[label].append(round(wall, 4))
                if k is not None:
                    kms[label].append(k)
            if r == repeats:
                with open(os.path.join(logs, f"{name}.{label}.log"), "w") as f:
                    f.write(text)
    base = settings[0][0]
    for label, env in settings:
        stats = os.path.join(logs, f"{name}.{label}.json")
        run(name, args, env, stats=stats)
        row = {"program": name, "args": " ".join(args), "setting": label, "env": env, "walls": walls[label],
               "kernel_ms": kms[label], "median_wall_s": statistics.median(walls[label]),
               "median_kernel_ms": statistics.median(kms[label]) if kms[label] else None,
               "same_output_as_first": verdicts[label] == verdicts[base], "output": verdicts[label][-2:],
               "rcs": sorted(rcs[label]), "stats": summary(stats)}
        first = statistics.median(walls[base])
        row["wall_over_first"] = round(row["median_wall_s"] / first, 3)
        with open(os.path.join(out, "configs.jsonl"), "a") as f:
            f.write(json.dumps(row) + "\n")
        kt = f", kernel {row['median_kernel_ms']} ms" if row["median_kernel_ms"] is not None else ""
        print(f"{name} {' '.join(args)} [{label}]: wall {row['median_wall_s']} s ({row['wall_over_first']}x){kt}, "
              f"same output {row['same_output_as_first']}, rc {row['rcs']}", flush=True)
PY
