#!/usr/bin/env bash
# On a GPU machine (the device tool), from the project root, with .whl/ carried (device-wheels.sh ale-py==0.12.1):
#   bash benchmarks/gpu_onpolicy_check.sh [DIVISOR]      (DIVISOR > 1 shortens every run; DEVICE=cpu for a dry run)
# The on-policy family (ac_main.py) on a GPU: for each case, a run on cuda, the same run again, and the same run
# paused with --stop_at halfway and continued with --resume; then whether the three wrote the same curves, training
# episodes (wall-clock column left out) and final models (--save_model), and each run's wall time. About 8 minutes
# on an H200 (benchmarks/results/h200_2026-11-28/ holds the first measurement, of a longer version).
# Cases: continuous ACER on HalfCheetah-v5 with experiments/acer_mujoco.yaml's flags (3 seeds, also on this
# machine's CPU, one thread), ACER on Pong with experiments/acer_pong.yaml's 16-environment flags (2 seeds),
# recurrent A2C on Pong (2 seeds, 16 environments, n = 20), and issue 66's speed cases (A2C and ACER on Pong, one
# seed, learning steps/s). Results: $OUT/onpolicy_gpu.json and a log per run under $OUT.
set -u
div=${1:-1}
dev=${DEVICE:-cuda}
usage() { echo "gpu_onpolicy_check.sh: $1" >&2; exit 2; }
[[ $div =~ ^[1-9][0-9]?$|^100$ ]] || usage "DIVISOR must be a whole number from 1 to 100, got '$div'"
[[ $dev =~ ^(cpu|cuda(:[0-9]+)?)$ ]] || usage "DEVICE must be cpu, cuda or cuda:N, got '$dev'"
if [[ $dev == cuda* ]] && ! python3 -c "import sys, torch; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then
    usage "no CUDA GPU here (or no torch): run it on a GPU machine, or with DEVICE=cpu for a dry run"
fi
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        2>&1 | tail -2
    export PYTHONPATH=/tmp/site:.
fi
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
work=$(mktemp -d)
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null; nproc
python3 -c "import torch, gymnasium; print('torch', torch.__version__, 'gymnasium', gymnasium.__version__)"
: > "$work/times"
timed() {  # timed LABEL TIMEOUT CMD...: run, append "LABEL start end rc" to the times file
    local label=$1 limit=$2 t0 rc
    shift 2
    t0=$(date +%s.%N)
    timeout "$limit" "$@" > "$OUT/$label.log" 2>&1
    rc=$?
    echo "$label $t0 $(date +%s.%N) $rc" >> "$work/times"
    echo "$label: rc $rc, $(tail -n 1 "$OUT/$label.log" | cut -c1-160)"
}
case_runs() {  # case_runs NAME STEPS STOP CPU_TIMEOUT FLAGS...  (CPU_TIMEOUT 0: no CPU run)
    local name=$1 steps=$2 stop=$3 cpu=$4
    shift 4
    local base=(python3 ac_main.py "$@" --max_time_steps "$steps" --quiet --threads 1 --save_model)
    timed "${name}_a" 150 "${base[@]}" --device "$dev" --checkpoint_freq 0 \
        --results_dir "$work/$name/a" --models_dir "$work/$name/a/models"
    timed "${name}_b" 150 "${base[@]}" --device "$dev" --checkpoint_freq 0 \
        --results_dir "$work/$name/b" --models_dir "$work/$name/b/models"
    timed "${name}_c1" 150 "${base[@]}" --device "$dev" --checkpoint_freq "$stop" --stop_at "$stop" \
        --checkpoint_dir "$work/$name/ckpt" \
        --results_dir "$work/$name/c" --models_dir "$work/$name/c/models"
    timed "${name}_c2" 150 "${base[@]}" --device "$dev" --checkpoint_freq "$stop" --resume \
        --checkpoint_dir "$work/$name/ckpt" \
        --results_dir "$work/$name/c" --models_dir "$work/$name/c/models"
    if [ "$cpu" != 0 ]; then
        timed "${name}_cpu" "$cpu" "${base[@]}" --device cpu --checkpoint_freq 0 \
            --results_dir "$work/$name/cpu" --models_dir "$work/$name/cpu/models"
    fi
}
s() { echo $(( $1 / div )); }
case_runs acer_halfcheetah "$(s 10000)" "$(s 5000)" 100 --policy ACER --env HalfCheetah-v5 --seeds 0-2 \
    --start_time_steps 0 --eval_freq "$(s 2500)" --eval_episodes 2 --replay_only --replay_ratio 4 --n_steps 50 \
    --envs_per_agent 1 --buffer_size 5000 --replay_start 1000 --trace_max 5 --trust_region_decay 0.995 \
    --trust_region_threshold 1 --action_std 0.3 --lr 0.0002
case_runs acer_pong "$(s 9600)" "$(s 4800)" 0 --policy ACER --env PongNoFrameskip-v4 --seeds 0 1 \
    --eval_freq "$(s 4800)" --eval_episodes 1 --lr 0.0001 --n_steps 20 --replay_ratio 4 --buffer_size 100000 \
    --trace_max 10 --trust_region_threshold 1 --trust_region_decay 0.99 --vf_coef 0.5 --max_grad_norm 40 \
    --envs_per_agent 16
case_runs a2c_lstm_pong "$(s 9600)" "$(s 4800)" 0 --policy A2C --env PongNoFrameskip-v4 --seeds 0 1 \
    --recurrent --eval_freq "$(s 4800)" --eval_episodes 1 --lr 0.0001 --n_steps 20 --envs_per_agent 16
# issue 66's goal cases: one seed each, 16 environments stepped by the worker processes (EnvPool does not travel to the
# device: its wheels are ~215 MB), learning steps/s from each record's timing (goals: A2C >= 5,000, ACER >= 2,000)
case_runs a2c_pong "$(s 64000)" "$(s 32000)" 0 --policy A2C --env PongNoFrameskip-v4 --seed 0 \
    --eval_freq "$(s 32000)" --eval_episodes 1 --n_steps 5 --envs_per_agent 16 --env_backend gymnasium
case_runs acer_pong_speed "$(s 32000)" "$(s 16000)" 0 --policy ACER --env PongNoFrameskip-v4 --seed 0 \
    --eval_freq "$(s 16000)" --eval_episodes 1 --lr 0.0001 --n_steps 20 --replay_ratio 4 --buffer_size 100000 \
    --trace_max 10 --trust_region_threshold 1 --trust_region_decay 0.99 --vf_coef 0.5 --max_grad_norm 40 \
    --envs_per_agent 16 --env_backend gymnasium
python3 - "$work" "$OUT/onpolicy_gpu.json" <<'EOF'
import json, sys
from pathlib import Path
import numpy as np
import torch
work, out = Path(sys.argv[1]), sys.argv[2]
times = {}
for line in (work / "times").read_text().split("\n"):
    if line.strip():
        label, t0, t1, rc = line.split()
        times[label] = {"wall_s": round(float(t1) - float(t0), 1), "rc": int(rc)}
def files(d):
    got = {}
    for p in sorted(d.glob("*.npy")):
        got[p.name] = np.load(p)
    for p in sorted(d.glob("*_episodes.csv")):
        got[p.name] = [",".join(r.split(",")[:4]) for r in p.read_text().splitlines()]
    for p in sorted((d / "models").glob("*.pt")):
        state = torch.load(p, map_location="cpu", weights_only=False)
        flat = {}
        def walk(prefix, x):
            if torch.is_tensor(x):
                flat[prefix] = x.detach().cpu().numpy()
            elif isinstance(x, dict):
                for k, v in x.items():
                    walk(f"{prefix}.{k}", v)
        walk(p.name, state)
        got.update(flat)
    return got
def same(a, b):
    if not a or a.keys() != b.keys():
        return False
    return all(np.array_equal(a[k], b[k], equal_nan=True) if isinstance(a[k], np.ndarray) else a[k] == b[k]
               for k in a)
report = {"times": times, "cases": {}}
for case in sorted(p for p in work.iterdir() if p.is_dir()):
    runs = {r.name: files(r) for r in case.iterdir() if r.is_dir() and r.name != "ckpt"}
    a = runs.get("a", {})
    info = {"files": len(a), "model_tensors": sum(".pt." in k for k in a),
            "repeat_equal": same(a, runs.get("b", {})), "resume_equal": same(a, runs.get("c", {}))}
    if "cpu" in runs:
        info["cpu_equal_gpu"] = same(a, runs["cpu"])
    info["curves"] = {k: np.round(v, 1).tolist() for k, v in a.items() if k.endswith(".npy")}
    if "cpu" in runs:
        info["cpu_curves"] = {k: np.round(v, 1).tolist() for k, v in runs["cpu"].items() if k.endswith(".npy")}
    info["episodes"] = {k: len(v) for k, v in a.items() if k.endswith(".csv")}
    # learning steps/s of run a (the record's loop seconds less its evaluations'), for the speed goals
    for record in sorted((case / "a").glob("*.json")):
        rec = json.loads(record.read_text())
        timing, steps = rec.get("timing"), rec["config"]["max_time_steps"]
        if timing and timing["loop_s"] > timing["evaluation_s"]:
            info.setdefault("learning_steps_s", {})[record.stem] = round(
                steps / (timing["loop_s"] - timing["evaluation_s"]), 1)
    report["cases"][case.name] = info
    print(case.name, {k: v for k, v in info.items() if k not in ("curves", "cpu_curves")})
for k, v in times.items():
    print(k, v)
Path(out).write_text(json.dumps(report, indent=1))
EOF
