"""Atari preprocessing (utils/envs/atari.py) and the batched Nature-DQN encoder (algorithms/common/cnn.py)."""
import gymnasium as gym
import numpy as np
import pytest
import torch
from torch.nn import functional as F

from algorithms.common.cnn import BatchedNatureCNN
from algorithms.common.nets import init_generators
from utils.envs import atari
from utils.errors import UsageError
from utils.run.files import OWNER_KEY

needs_ale = pytest.mark.skipif(not atari.available(), reason="ale-py is not installed")


class CountSteps(gym.Wrapper):
    """Counts the raw frames stepped since the last reset and keeps the last two observations."""

    def __init__(self, env):
        super().__init__(env)
        self.count, self.frames = 0, []

    def reset(self, **kwargs):
        self.count, self.frames = 0, []
        return self.env.reset(**kwargs)

    def step(self, action):
        out = self.env.step(action)
        self.count += 1
        self.frames = (self.frames + [out[0].copy()])[-2:]
        return out


def raw(env_id="ALE/Pong-v5"):
    atari.register()
    return gym.make(env_id, frameskip=1, repeat_action_probability=0.0)


# ---------------------------------------------------------------- ids and construction

@needs_ale
def test_ids():
    atari.register()
    atari.register()  # idempotent
    assert atari.available()
    assert atari.is_atari("ALE/Pong-v5") and atari.is_atari("ALE/Breakout-v5")
    assert atari.is_atari("PongNoFrameskip-v4") and atari.is_atari("BreakoutNoFrameskip-v4")
    assert not atari.is_atari("Pendulum-v1") and not atari.is_atari("HalfCheetah-v5")
    assert not atari.is_atari("NoSuchGame-v0")


@needs_ale
@pytest.mark.parametrize("env_id", ["ALE/Pong-v5", "PongNoFrameskip-v4"])
@pytest.mark.parametrize("training", [True, False])
def test_shapes_and_raw_game(env_id, training):
    env = atari.make_atari(env_id, training)
    assert env.observation_space.shape == (4, 84, 84) and env.observation_space.dtype == np.uint8
    obs, _ = env.reset(seed=0)
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    for _ in range(3):
        obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
        assert isinstance(reward, float)
    assert obs.max() > obs.min()  # a real picture, not a blank frame
    # the raw game: no frame skip of its own, no sticky actions (v5's default 0.25 turned off)
    assert env.unwrapped._frameskip == 1
    assert env.spec.kwargs["frameskip"] == 1 and env.spec.kwargs["repeat_action_probability"] == 0.0
    assert env.spec.max_episode_steps is None  # the ALE ids register none
    names = {type(w).__name__ for w in _chain(env)}
    assert ("EpisodicLife" in names) == training and ("ClipReward" in names) == training
    assert "FireReset" in names  # Pong's actions include FIRE
    env.close()


def _chain(env):
    while isinstance(env, gym.Wrapper):
        yield env
        env = env.env


@needs_ale
def test_frame_skip_of_the_game_refused():
    with pytest.raises(ValueError):
        atari.make_atari("ALE/Pong-v5", True, frameskip=4)


@needs_ale
def test_no_fire_reset_without_fire():
    # MsPacman's actions have no FIRE
    env = atari.make_atari("ALE/MsPacman-v5", False)
    assert "FIRE" not in env.unwrapped.get_action_meanings()
    assert "FireReset" not in {type(w).__name__ for w in _chain(env)}


@needs_ale
def test_time_limit_in_learner_steps_over_a_whole_game():
    env = atari.make_atari("ALE/Breakout-v5", True, max_episode_steps=60)
    assert env.spec.max_episode_steps == 60
    _, info = env.reset(seed=0)
    lives, steps, lost = info["lives"], 0, 0
    while True:
        _, _, terminated, truncated, info = env.step(0)
        steps += 1
        assert steps <= 60
        if truncated:
            break
        if terminated:  # a lost life: the limit goes on counting through the continuing reset
            lost += 1
            _, info = env.reset()
    assert lost >= 1 and info["lives"] > 0
    # the reset steps (no-op, FIRE, action 2) count too, so fewer than 60 learner steps were taken
    assert steps < 60
    _, info = env.reset()
    assert info["lives"] == lives  # a truncated game is a game over: the next reset restarts it


# ---------------------------------------------------------------- no-op reset

@needs_ale
def test_noop_reset_counts_and_seeding():
    def reset(seed):
        counter = CountSteps(raw())
        env = atari.wrap_atari(counter, training=False)
        obs, _ = env.reset(seed=seed)
        noops = env.get_wrapper_attr("noops")
        # the no-ops, then FIRE and action 2 of FireReset, 4 frames each
        assert counter.count == noops + 2 * 4
        assert 1 <= noops <= 30
        return noops, obs

    counts = {seed: reset(seed)[0] for seed in range(6)}
    assert len(set(counts.values())) > 1, counts  # the number of no-ops depends on the seed
    n0, obs0 = reset(3)
    n1, obs1 = reset(3)
    assert n0 == n1 == counts[3] and np.array_equal(obs0, obs1)  # a seeded reset is reproducible


@needs_ale
def test_noop_count_redrawn_at_every_reset():
    env = atari.make_atari("ALE/Pong-v5", False)
    env.reset(seed=0)
    drawn = {env.get_wrapper_attr("noops")}
    for _ in range(5):
        env.reset()  # unseeded: goes on with the game's own generator
        drawn.add(env.get_wrapper_attr("noops"))
    assert len(drawn) > 1


# ---------------------------------------------------------------- frame skip and max-pooling

@needs_ale
def test_frame_skip_max_pools_the_last_two_frames():
    counter = CountSteps(raw())
    env = atari.MaxAndSkip(counter, 4)
    env.reset(seed=0)
    for action in [0, 2, 3, 2, 2]:
        obs, *_ = env.step(action)
        assert counter.count % 4 == 0
        assert np.array_equal(obs, np.maximum(counter.frames[0], counter.frames[1]))


def test_area_resize():
    m = atari.area_matrix(210, 84)
    assert m.shape == (84, 210) and np.allclose(m.sum(1), 1.0)  # constants stay constant
    assert np.allclose(atari.area_matrix(4, 2), [[0.5, 0.5, 0, 0], [0, 0, 0.5, 0.5]])
    # 210 / 84 = 2.5 input rows per output row: row 0 averages rows 0, 1 and half of 2
    assert np.allclose(m[0, :3], [0.4, 0.4, 0.2]) and np.allclose(m[1, 2:5], [0.2, 0.4, 0.4])


class Screen(gym.Env):
    """A stand-in game: only its RGB observation space matters to GrayResize."""

    def __init__(self, h, w):
        self.observation_space = gym.spaces.Box(0, 255, (h, w, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(2)


@pytest.mark.parametrize("shape", [(210, 160), (250, 160), (84, 84), (97, 300)])
def test_gray_resize_is_the_area_matrix_product(shape):
    """The taps give the product rows @ gray @ cols of the area matrices, up to float rounding (a pixel at an exact
    half may round the other way)."""
    env = atari.GrayResize(Screen(*shape))
    index, weight = atari.area_taps(shape[0], 84)
    m = atari.area_matrix(shape[0], 84)
    rebuilt = np.zeros_like(m)
    for k in range(len(index)):
        rebuilt[np.arange(84), index[k]] += weight[k]
    np.testing.assert_array_equal(rebuilt, m)  # the taps are the matrix, every nonzero entry once
    rng = np.random.default_rng(0)
    differ = 0
    for _ in range(20):
        frame = rng.integers(0, 256, (*shape, 3), dtype=np.uint8)
        gray = frame.astype(np.float64) @ env.LUMA.astype(np.float64)
        exact = np.clip(np.rint(env.rows.astype(np.float64) @ gray @ env.cols.astype(np.float64)), 0, 255)
        out = env.observation(frame)
        assert out.dtype == np.uint8 and out.shape == (84, 84)
        assert np.abs(out - exact).max() <= 1
        differ += int((out != exact).sum())
    assert differ <= 20 * 84 * 84 // 1000


# ---------------------------------------------------------------- episodic life

@needs_ale
def test_training_life_loss_ends_the_episode_not_the_game():
    env = atari.make_atari("ALE/Breakout-v5", True)
    _, info = env.reset(seed=0)
    assert info["lives"] == 5
    losses = 0
    for _ in range(2000):
        _, reward, terminated, truncated, info = env.step(0)
        assert not truncated
        if terminated:
            losses += 1
            lives_at_end, frame_at_end = info["lives"], info["episode_frame_number"]
            if lives_at_end == 0:  # the real game over
                break
            assert lives_at_end == 5 - losses  # terminated at this life loss
            obs, info = env.reset()
            # the same game goes on: one life fewer, frames counted on from the end of the last life
            assert obs.shape == (4, 84, 84)
            assert info["lives"] == lives_at_end
            assert info["episode_frame_number"] > frame_at_end
    assert losses == 5
    _, info = env.reset()
    assert info["lives"] == 5 and info["episode_frame_number"] <= 30 + 8  # a new game


@needs_ale
def test_evaluation_plays_whole_games():
    env = atari.make_atari("ALE/Breakout-v5", False)
    _, info = env.reset(seed=0)
    lives, lost = info["lives"], 0
    for _ in range(2000):
        _, _, terminated, truncated, info = env.step(1)  # FIRE: serve again after each lost life
        if info["lives"] < lives:
            lost += 1
            lives = info["lives"]
            if lives > 0:
                assert not terminated
        if terminated or truncated:
            break
    assert terminated and info["lives"] == 0 and lost == 5


# ---------------------------------------------------------------- rewards

@needs_ale
def test_rewards_clipped_for_training_raw_for_evaluation():
    def rewards(training):
        env = atari.make_atari("ALE/SpaceInvaders-v5", training)
        env.reset(seed=0)
        out = []
        for _ in range(200):  # FIRE until invaders worth 5 to 30 points are hit
            _, reward, terminated, truncated, info = env.step(1)
            out.append((reward, info.get("raw_reward")))
            if sum(r != 0 for r, _ in out) >= 2 or terminated or truncated:
                break
        return out

    evaluation = rewards(False)
    assert max(r for r, _ in evaluation) > 1  # the game's own scores
    training = rewards(True)
    assert {r for r, _ in training} <= {-1.0, 0.0, 1.0} and 1.0 in {r for r, _ in training}
    # the same seed, the same game: training sees the sign of the score evaluation sees
    assert [raw for _, raw in training] == [r for r, _ in evaluation]
    assert [r for r, _ in training] == [float(np.sign(r)) for r, _ in evaluation]


def test_clip_reward_signs():
    class Emit(gym.Env):
        observation_space = gym.spaces.Box(0, 1, (1,))
        action_space = gym.spaces.Discrete(1)

        def __init__(self):
            self.rewards = iter([5.0, -3.0, 0.0, 0.5, -0.25])

        def reset(self, *, seed=None, options=None):
            return np.zeros(1, np.float32), {}

        def step(self, action):
            return np.zeros(1, np.float32), next(self.rewards), False, False, {}

    env = atari.ClipReward(Emit())
    env.reset()
    got = [env.step(0)[1:5:3] for _ in range(5)]
    assert [r for r, _ in got] == [1.0, -1.0, 0.0, 1.0, -1.0]
    assert [info["raw_reward"] for _, info in got] == [5.0, -3.0, 0.0, 0.5, -0.25]


# ---------------------------------------------------------------- the batched CNN

def _reference(cnn, i, x):
    """Member i's encoder computed alone, with plain conv2d/linear on its slice of the weights."""
    h = x.float() / 255.0 if x.dtype == torch.uint8 else x
    for w, b, stride in zip(cnn.weights, cnn.biases, cnn.strides):
        h = F.relu(F.conv2d(h, w[i], b[i], stride=stride))
    h = h.flatten(1)
    return F.relu(F.linear(h, cnn.fc.weight[i].T, cnn.fc.bias[i, 0]))


def test_cnn_shapes_and_layers():
    cnn = BatchedNatureCNN(4, init_generators([0, 1, 2]))
    assert cnn.features == 512
    assert [tuple(w.shape) for w in cnn.weights] == [(3, 32, 4, 8, 8), (3, 64, 32, 4, 4), (3, 64, 64, 3, 3)]
    assert cnn.strides == [4, 2, 1] and cnn.flat == 64 * 7 * 7
    x = torch.randint(0, 256, (3, 5, 4, 84, 84), dtype=torch.uint8)
    out = cnn(x)
    assert out.shape == (3, 5, 512) and out.dtype == torch.float32 and (out >= 0).all()
    assert torch.allclose(out, cnn(x.float() / 255.0), atol=1e-6)  # uint8 pixels are divided by 255
    assert BatchedNatureCNN(2, init_generators([0]), features=64)(torch.zeros(1, 2, 2, 84, 84)).shape == (1, 2, 64)
    with pytest.raises(ValueError):
        cnn(torch.zeros(2, 5, 4, 84, 84))


def test_cnn_members_equal_independent_networks():
    cnn = BatchedNatureCNN(4, init_generators([3, 4, 5]))
    x = torch.randint(0, 256, (3, 6, 4, 84, 84), dtype=torch.uint8)
    out = cnn(x)
    for i in range(3):
        ref = _reference(cnn, i, x[i])
        assert torch.allclose(out[i], ref, atol=1e-5, rtol=1e-5)
        assert ref.abs().sum() > 0
    assert not torch.allclose(out[0], out[1])  # different weights, different outputs


@pytest.mark.parametrize("rows", [6, 16])
def test_a_members_numbers_do_not_depend_on_the_members_beside_it(rows):
    """Member 1 of three computes, forward and backward, the bits it computes alone, at one torch thread (the
    threads of a reproducible run, and of each test worker of README's command): the convolutions run member by
    member (one grouped convolution of all members took other oneDNN kernels for other member counts, and a seed
    batched with others learned other last bits than alone: 2e-5 in the first layer after 1,600 Pong steps). At two
    threads the batched products of the linear layers do not give a member its lone bits (6 rows; the heads at any
    row count): docs/reproducibility.md."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        one_member_alone_and_beside_others(rows)
    finally:
        torch.set_num_threads(before)


def one_member_alone_and_beside_others(rows):
    three, alone = BatchedNatureCNN(4, init_generators([0, 1, 2])), BatchedNatureCNN(4, init_generators([1]))
    x = torch.randint(0, 256, (3, rows, 4, 84, 84), dtype=torch.uint8)
    out3, out1 = three(x), alone(x[1:2])
    assert torch.equal(out3[1], out1[0])
    out3[1].square().sum().backward()
    out1[0].square().sum().backward()
    for (name, p3), p1 in zip(three.named_parameters(), alone.parameters()):
        assert torch.equal(p3.grad[1], p1.grad[0]), name


def test_cnn_gradients_stay_in_their_member():
    cnn = BatchedNatureCNN(4, init_generators([0, 1]))
    x = torch.rand(2, 3, 4, 84, 84)
    cnn(x)[0].square().sum().backward()
    for name, p in cnn.named_parameters():
        assert p.grad[0].abs().sum() > 0, name
        assert torch.count_nonzero(p.grad[1]) == 0, name


def test_cnn_init_depends_only_on_the_members_generator():
    one = BatchedNatureCNN(4, init_generators([7]))
    three = BatchedNatureCNN(4, init_generators([7, 8, 9]))
    again = BatchedNatureCNN(4, init_generators([7, 8, 9]))
    for (name, p1), p3, pa in zip(one.named_parameters(), three.parameters(), again.parameters()):
        assert torch.equal(p1[0], p3[0]), name
        assert torch.equal(p3, pa), name  # deterministic
        assert not torch.equal(p3[0], p3[1]), name


@needs_ale
@pytest.mark.slow
def test_an_atari_run_with_lives_resumes_exactly(tmp_path):
    """SpaceInvaders has 3 lives: a learner episode ends at each, while the game goes on. A run stopped at a
    checkpoint and resumed equals the uninterrupted one: curves, every training episode (return, length, step) and
    the final model. Before the game's whole log was kept (with a reset marker per lost life), the resume could not
    rebuild the emulator and stopped with 'cannot restore ... exactly'."""
    import csv

    import ac_main
    from utils.run import Trainer

    base = ["--policy", "A2C", "--env", "ALE/SpaceInvaders-v5", "--envs_per_agent", "2", "--n_steps", "5",
            "--max_time_steps", "1200", "--eval_freq", "400", "--eval_episodes", "1", "--threads", "1", "--quiet",
            "--checkpoint_freq", "400", "--save_model", "--env_backend", "gymnasium"]  # this path's game logs

    def trainer(name, *more):
        return Trainer(ac_main.build_config(ac_main.parse(base + ["--results_dir", str(tmp_path / name), "--models_dir",
                                                                  str(tmp_path / name / "m"), *more])))

    full = trainer("full").run()
    trainer("cut").run(stop_at=600)
    log = torch.load(tmp_path / "cut" / "checkpoints" / "A2C_ALE-SpaceInvaders-v5_0.pt", weights_only=True)
    markers = sum(int((e["actions"] == -1).sum()) for e in log["episodes"])
    assert markers >= 1, "no life was lost before the checkpoint: the test would not test the resume of a game"
    cut = trainer("cut", "--resume").run()
    np.testing.assert_array_equal(full[0], cut[0])

    def episodes(name):
        with open(tmp_path / name / "A2C_ALE-SpaceInvaders-v5_0_episodes.csv") as f:
            return [{k: v for k, v in row.items() if k != "wall_s"} for row in csv.DictReader(f)]

    assert len(episodes("full")) >= 2 and episodes("full") == episodes("cut")  # games, each of several lives
    # a game played across the pause (2 environments: the agent's step counts 2 per game step)
    assert any(int(r["step"]) - 2 * int(r["length"]) < 600 < int(r["step"]) for r in episodes("full"))
    def tensors(state, prefix=""):  # the model file's nested dicts, flattened (its run's name aside: two runs)
        for k, v in state.items():
            if not prefix and k == OWNER_KEY:
                continue
            yield from tensors(v, f"{prefix}{k}.") if isinstance(v, dict) else [(prefix + k, v)]

    a, b = (dict(tensors(torch.load(tmp_path / n / "m" / "A2C_ALE-SpaceInvaders-v5_0.pt", weights_only=True)))
            for n in ("full", "cut"))
    assert len(a) >= 8 and a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@needs_ale
@pytest.mark.slow
def test_a_checkpoint_from_before_whole_game_rows_resumes_logging_lives(tmp_path, monkeypatch):
    """Until 2026-12-04 an Atari row was a learner's episode (a life, rewards clipped). A checkpoint of such a run
    (its log state without ``games``) resumes logging lives, so its file is the uninterrupted lives run's, not lives
    up to the pause and games after it; a new run logs games."""
    import csv

    import ac_main
    from utils.run import Trainer
    from utils.run.onpolicy.episode_log import EpisodeLog

    base = ["--policy", "A2C", "--env", "ALE/SpaceInvaders-v5", "--envs_per_agent", "2", "--n_steps", "5",
            "--max_time_steps", "1200", "--eval_freq", "600", "--eval_episodes", "1", "--threads", "1", "--quiet",
            "--checkpoint_freq", "600", "--env_backend", "gymnasium"]

    def trainer(name, *more):
        return Trainer(ac_main.build_config(ac_main.parse(base + ["--results_dir", str(tmp_path / name), *more])))

    def episodes(name):
        with open(tmp_path / name / "A2C_ALE-SpaceInvaders-v5_0_episodes.csv") as f:
            return [{k: v for k, v in row.items() if k != "wall_s"} for row in csv.DictReader(f)]

    games = trainer("games").run()
    new_init = EpisodeLog.__init__

    def older_init(self, *args):  # the code before whole-game rows logged the learner's episodes
        new_init(self, *args)
        self.games = False

    with monkeypatch.context() as m:
        m.setattr(EpisodeLog, "__init__", older_init)
        lives = trainer("lives").run()
        trainer("cut").run(stop_at=600)
    path = tmp_path / "cut" / "checkpoints" / "A2C_ALE-SpaceInvaders-v5_0.pt"
    state = torch.load(path, weights_only=True)
    assert state["episode_log"].pop("games") is False  # what an older checkpoint lacks
    torch.save(state, path)
    cut = trainer("cut", "--resume").run()
    np.testing.assert_array_equal(lives[0], cut[0])
    np.testing.assert_array_equal(games[0], cut[0])  # the logging never touches the learning
    assert episodes("cut") == episodes("lives")
    rows = [r for r in episodes("lives") if int(r["step"]) > 600]
    assert len(rows) >= 2 and len(episodes("lives")) > len(episodes("games"))  # lives, and more of them than games
    top = max(float(r["return"]) for r in episodes("lives"))
    assert max(float(r["return"]) for r in episodes("games")) > 5 * top  # a game's points (5-30 an alien) vs kills
    state = torch.load(path, weights_only=True) if path.exists() else None
    assert state is None or state["episode_log"]["games"] is False  # it stays an older run's log


@needs_ale
def test_training_environments_resume_exactly_after_a_game_over():
    """A checkpoint taken after a game of Pong ended restores the environment exactly: the next game began with a
    reset that goes through the emulator's own random generator, so the log keeps the emulator's state at the game
    over (before, a Pong run could not resume once its first game had ended: 'cannot restore ... exactly')."""
    from utils.envs.workers import LocalEnvs

    kinds = dict(actions=("discrete",), who="A2C")
    envs = LocalEnvs("PongNoFrameskip-v4", [3], [103], 1, **kinds)
    rng = np.random.default_rng(0)
    games = 0
    while games < 1:  # random play loses a game of Pong in about 800 steps
        ended = envs.step(rng.integers(0, 6, size=(1,)))[5]
        games += int(ended[0])
    for _ in range(20):  # into the new game
        envs.step(rng.integers(0, 6, size=(1,)))
    state = envs.state_dict()
    assert "emulator" in state["episodes"][0]
    again = LocalEnvs("PongNoFrameskip-v4", [3], [103], 1, **kinds)
    again.load_state_dicts([state])
    for _ in range(200):
        actions = rng.integers(0, 6, size=(1,))
        a, b = envs.step(actions), again.step(actions)
        assert all(np.array_equal(x, y) for x, y in zip(a, b))
    # an emulator state this ale-py cannot read (another version's, a damaged file) is one line, not a traceback
    state["episodes"][0]["emulator"] = torch.zeros(64, dtype=torch.uint8)
    broken = LocalEnvs("PongNoFrameskip-v4", [3], [103], 1, **kinds)
    with pytest.raises(UsageError, match="cannot restore PongNoFrameskip-v4's emulator"):
        broken.load_state_dicts([state])
    for e in (envs, again, broken):
        e.close()


@needs_ale
def test_a3c_evaluation_plays_whole_games_at_the_games_score():
    """A3C's evaluation (its own code path, not the replay learners' environments) plays whole games with the
    game's score, as A2C's and ACER's do: an always-FIRE policy on Space Invaders plays until every life is lost
    (the training environment would end the episode at the first), and the return is the sum of the raw scores
    (5 to 30 an invader; training would see their signs)."""
    from utils.run.onpolicy.asynchronous import GreedyEvaluation

    class AlwaysFire:
        recurrent, discrete = False, True

        def act(self, obs, greedy):
            return None, torch.ones(len(obs), dtype=torch.long)

    evaluation = GreedyEvaluation("ALE/SpaceInvaders-v5", None, 0, 1)
    score = evaluation(AlwaysFire())
    assert evaluation.envs[0].unwrapped.ale.lives() == 0
    whole = atari.make_atari("ALE/SpaceInvaders-v5", False)  # the same game, played by hand from the same reset seed
    whole.reset(seed=int(evaluation.seeds[0]))
    total, done = 0.0, False
    while not done:
        _, r, terminated, truncated, _ = whole.step(1)
        total, done = total + r, terminated or truncated
    assert score == total and total > 100  # more than a handful of clipped +1s could make
