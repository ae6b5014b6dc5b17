#!/usr/bin/env bash
# A checkpoint written by one commit, resumed by another, gives the files of the first commit's uninterrupted run:
# for a refactor that must keep old checkpoints resumable (the settings they recorded, the state they hold).
#   git worktree add /tmp/before HEAD~1
#   bash benchmarks/resume_identity.sh /tmp/before . /tmp/resume_id     # prints DIFFERS for any curve that differs
# Each run: the whole run and a paused one by BEFORE, the paused one resumed by AFTER; about 10 minutes of one core.
# A3C is not reproducible bit for bit (asynchronous workers): it is only resumed.
set -euo pipefail
before=$(cd "$1" && pwd); after=$(cd "$2" && pwd); out=$3; py=${PYTHON:-python}
rm -rf "$out"; mkdir -p "$out"; out=$(cd "$out" && pwd)
common=(--threads 1 --quiet --eval_episodes 1)
runs=(
 "DASE_main.py|800|--policy DASE_TD3 --env Pendulum-v1 --seeds 0 1 --max_time_steps 1200 --start_time_steps 400 --eval_freq 400 --checkpoint_freq 400"
 "DASE_main.py|800|--policy DIFF_TD3 --env RandomExtremePendulum-v1 --num_agents 3 --sync_freq 2 --eval_tasks all --max_time_steps 1200 --start_time_steps 400 --eval_freq 400 --checkpoint_freq 400"
 "DASE_main.py|800|--policy DASE_TD3 --env Pendulum-v1 --max_time_steps 1500 --start_time_steps 300 --eval_freq 500 --hidden_sizes 40 30 --batch_size 100 --buffer_size 1000 --warmup_actions policy --timelimit_as_terminal --episode_eval --solved_at -100000 --solved_window 2 --checkpoint_freq 400"
 "ac_main.py|1600|--policy DIFF_A2C --env CartPole-v1 --num_agents 3 --max_time_steps 3200 --eval_freq 1600 --checkpoint_freq 800"
 "ac_main.py|1600|--policy ACER --max_time_steps 3200 --eval_freq 1600 --optimizer adam --checkpoint_freq 800"
 "ac_main.py|1000|--policy ACER --env Pendulum-v1 --max_time_steps 2000 --eval_freq 1000 --envs_per_agent 1 --n_steps 50 --action_std 0.2 --checkpoint_freq 1000"
 "ac_main.py|1600|--policy A2C --recurrent --reward_scale 0.5 --max_time_steps 3200 --eval_freq 800 --checkpoint_freq 800"
)
i=0; differ=0
for entry in "${runs[@]}"; do
  i=$((i+1)); IFS='|' read -r script stop flags <<< "$entry"
  read -r -a f <<< "$flags"
  (cd "$before" && "$py" "$script" "${f[@]}" "${common[@]}" --results_dir "$out/whole$i" --checkpoint_dir "$out/ckw$i" > /dev/null)
  (cd "$before" && "$py" "$script" "${f[@]}" "${common[@]}" --results_dir "$out/piece$i" --checkpoint_dir "$out/ckp$i" \
      --stop_at "$stop" > /dev/null)
  (cd "$after" && "$py" "$script" "${f[@]}" "${common[@]}" --results_dir "$out/piece$i" --checkpoint_dir "$out/ckp$i" \
      --resume > /dev/null)
  for curve in "$out/whole$i"/*.npy; do
    cmp -s "$curve" "$out/piece$i/$(basename "$curve")" || { echo "DIFFERS: $curve"; differ=1; }
  done
  echo "$script ${f[1]}: $(ls "$out/whole$i"/*.npy | wc -l) files compared"
done
a3c=(--policy A3C --num_processes 2 --max_time_steps 4000 --eval_freq 2000 --checkpoint_freq 2000 "${common[@]}"
     --results_dir "$out/a3c" --checkpoint_dir "$out/cka3c")
(cd "$before" && "$py" ac_main.py "${a3c[@]}" --stop_at 2000 > /dev/null)
(cd "$after" && "$py" ac_main.py "${a3c[@]}" --resume > /dev/null)
"$py" -c "import numpy as np, glob; print('A3C resumed to', [len(np.load(f)) for f in glob.glob('$out/a3c/*.npy')], 'evaluations')"
exit $differ
