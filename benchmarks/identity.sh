#!/usr/bin/env bash
# Short runs of every optimizer and update path, for a refactor's `cmp` against the commit before:
#   git worktree add /tmp/before HEAD~1            # or any commit
#   bash benchmarks/identity.sh /tmp/before /tmp/id_before
#   bash benchmarks/identity.sh .           /tmp/id_after
#   diff -r /tmp/id_before /tmp/id_after && echo identical   # curves, weights, episode rows
# Each run is one process with one torch thread; about 5 minutes of one core in all. JSON records (times,
# versions) and the training episode logs' wall-clock column are left out of the comparison.
set -euo pipefail
checkout=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
py=${PYTHON:-python}
common=(--threads 1 --quiet --checkpoint_freq 0)
cd "$checkout"
run() {  # run NAME SCRIPT FLAGS...: one run into $out/NAME
    local name=$1 script=$2
    shift 2
    "$py" "$script" "$@" "${common[@]}" --results_dir "$out/$name" > "$out/$name.log" 2>&1 \
        || { echo "$name failed: $(tail -1 "$out/$name.log")"; exit 1; }
}
run a2c ac_main.py --policy A2C --env CartPole-v1 --envs_per_agent 8 --seeds 0 1 --max_time_steps 4000 \
    --eval_freq 2000 --eval_episodes 2
run acer ac_main.py --policy ACER --env CartPole-v1 --seeds 0 1 --max_time_steps 3200 --eval_freq 1600 --eval_episodes 2
run acer_cont ac_main.py --policy ACER --env Pendulum-v1 --max_time_steps 2000 --eval_freq 1000 --eval_episodes 1
run diff_a2c ac_main.py --policy DIFF_A2C --env CartPole-v1 --num_agents 3 --max_time_steps 3200 --eval_freq 1600 \
    --eval_episodes 1
run dase_td3 DASE_main.py --policy DASE_TD3 --env Pendulum-v1 --seeds 0 1 --max_time_steps 1200 \
    --start_time_steps 400 --eval_freq 400 --eval_episodes 1
run ddpg DASE_main.py --policy DDPG --env Pendulum-v1 --max_time_steps 1200 --start_time_steps 400 --eval_freq 400 \
    --eval_episodes 1
run dpd_td3 DASE_main.py --policy DPD_TD3 --env Pendulum-v1 --max_time_steps 1200 --start_time_steps 400 \
    --eval_freq 400 --eval_episodes 1
run tutorial DASE_main.py --policy DASE_TD3 --env Pendulum-v1 --max_time_steps 1500 --start_time_steps 300 \
    --eval_freq 500 --eval_episodes 1 --hidden_sizes 40 30 --actor_lr 1e-3 --critic_lr 1e-3 --batch_size 100 \
    --buffer_size 1000 --warmup_actions policy --timelimit_as_terminal --episode_eval --solved_at -100000 \
    --solved_window 2
run dase_sac sac_main.py --policy DASE_SAC --env Pendulum-v1 --num_steps 1200 --start_steps 400 --eval_freq 400 \
    --eval_episodes 1
run sac_discrete sac_main.py --policy SAC --env CartPole-v1 --num_steps 1200 --start_steps 400 --eval_freq 400 \
    --eval_episodes 1
run sac_gru sac_main.py --policy SAC --env VelocityMaskedPendulum-v1 --seq_encoder gru --use_prediction \
    --num_steps 900 --start_steps 300 --eval_freq 300 --eval_episodes 1
run sac_pixels sac_main.py --policy SAC --env PixelPendulum-v1 --num_steps 160 --start_steps 40 --eval_freq 40 \
    --eval_episodes 1 --batch_size 8 --buffer_size 500 --image_features 8 --hidden_size 16 --siamese atc
run td3_norm_rnd DASE_main.py --policy TD3 --env Pendulum-v1 --normalize_obs --rnd --max_time_steps 1200 \
    --start_time_steps 400 --eval_freq 400 --eval_episodes 1
find "$out" -name '*.json' -delete
find "$out" -name '*.log' -delete
find "$out" -name '*_episodes.csv' -print0 | while IFS= read -r -d '' f; do
    cut -d, -f1-4 "$f" > "$f.tmp" && mv "$f.tmp" "$f"
done
echo "$(find "$out" -name '*.npy' | wc -l) curve files in $out"
