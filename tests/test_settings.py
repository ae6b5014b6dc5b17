"""Typed settings declared once (utils/settings.py, utils/run/onpolicy/settings.py): the flags generated from them,
their checks, which algorithm takes which flag, and records older than a setting read with its default."""
import argparse
import json
from dataclasses import dataclass, fields
from pathlib import Path

import pytest

import ac_main
from utils.errors import UsageError
from utils.naming import settings_owners
from utils.run.checkpoint import check_compatible
from utils.run.onpolicy.settings import A2CSettings, A3CSettings, ACERSettings
from utils.settings import Settings, add_flags, again, count, defaults, filled, from_flags, real, setting

ROOT = Path(__file__).resolve().parent.parent
ALGORITHM_SETTINGS = settings_owners("ac_main.py")


def test_each_algorithm_has_its_references_defaults():
    """The values the reference codes use, one class each (SB3/Diff-DAC's A2C, the A3C references', baselines' ACER)."""
    a2c, a3c, acer = A2CSettings(), A3CSettings(), ACERSettings()
    assert (a2c.lr, a2c.n_steps, a2c.max_grad_norm, a2c.envs_per_agent) == (7e-4, 5, 0.5, 8)
    assert (a3c.lr, a3c.n_steps, a3c.max_grad_norm, a3c.num_processes) == (1e-4, 20, 40.0, 2)
    assert (acer.lr, acer.n_steps, acer.max_grad_norm, acer.buffer_size, acer.replay_ratio, acer.trace_max) == \
        (7e-4, 20, 10.0, 100_000, 4.0, 10.0)
    assert not hasattr(acer, "gae_lambda") and acer.q_coef == 0.5  # ACER's targets are Retrace's; its Q loss weight


def test_every_setting_is_one_flag_on_ac_main_with_its_defaults_in_the_help():
    """A flag per setting, once however many algorithms take it; --help names each algorithm's default."""
    parser = argparse.ArgumentParser()
    add_flags(parser, ALGORITHM_SETTINGS)
    flags = {o for a in parser._actions for o in a.option_strings} - {"-h", "--help"}
    declared = {("--vf_coef" if f.name == "q_coef" else "--no_trust_region" if f.name == "trust_region"
                 else f"--{f.name}") for c in ALGORITHM_SETTINGS.values() for f in fields(c)}
    assert flags == declared
    help_text = " ".join(parser.format_help().split())
    assert "(default: 0.0007 for A2C and ACER; 0.0001 for A3C; 0.0003 for SEAC)" in help_text
    assert "(default: 5 for A2C and SEAC; 20 for A3C and ACER)" in help_text
    assert "ACER: replay capacity per agent in transitions" in help_text  # the algorithms that take it, named


def test_ac_main_s_agents_and_diffusion_help_speaks_of_its_own_policies(capsys):
    """ac_main.py --help: --num_agents's default as default_num_agents gives it for ac_main's policies, and neither
    flag's text names a policy (DASE_, DPD_, TD3) ac_main.py does not take."""
    import re

    from utils.naming import default_num_agents, with_diffusion

    with pytest.raises(SystemExit):
        ac_main.parse(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    start = text.index("--num_agents NUM_AGENTS agents") + len("--num_agents NUM_AGENTS")
    part = text[start:text.index("--init {", start)]
    assert "(default: 2 for SEAC, 4 for DIFF_A2C, 1 otherwise)" in part and "A2C becomes DIFF_A2C" in part
    assert {p: default_num_agents(p) for p in ac_main.POLICIES} == {"A2C": 1, "A3C": 1, "ACER": 1, "SEAC": 2,
                                                                   "DIFF_A2C": 4}
    assert with_diffusion("A2C") == "DIFF_A2C"
    names = set(re.findall(r"(?<![\w-])[A-Z][A-Z0-9]+(?:_[A-Z0-9]*)*", part))
    assert names and names <= set(ac_main.POLICIES), names - set(ac_main.POLICIES)


def test_adding_a_setting_is_one_field_and_it_is_parsed_checked_and_refused_elsewhere():
    """The generator over a settings class of one's own: a new field is a flag, a range check, and a one-line refusal
    on the algorithm that does not take it."""
    @dataclass
    class One(Settings):
        rate: float = setting(0.5, "a rate", parse=real, low=0, high=1)

    @dataclass
    class Two(One):
        rate: float = again(0.25)
        width: int = setting(4, "a width", parse=count, low=1)

    classes = {"ONE": One, "TWO": Two}
    parser = argparse.ArgumentParser()
    add_flags(parser, classes)
    assert "(default: 0.5 for ONE; 0.25 for TWO)" in " ".join(parser.format_help().split())
    two = from_flags(parser.parse_args(["--width", "1e1"]), Two, classes, "TWO")
    assert (two.rate, two.width) == (0.25, 10)
    with pytest.raises(UsageError, match=r"^--width applies to TWO, not ONE; drop it$"):
        from_flags(parser.parse_args(["--width", "3"]), One, classes, "ONE")
    with pytest.raises(UsageError, match=r"^--rate 2 must be in \[0, 1\]$"):
        from_flags(parser.parse_args(["--rate", "2"]), Two, classes, "TWO").check()


@pytest.mark.parametrize("args, words", [
    (["--policy", "A2C", "--lr", "0"], "--lr 0 must be > 0"),
    (["--policy", "A3C", "--gamma", "1.5"], "--gamma 1.5 must be in [0, 1]"),
    (["--policy", "ACER", "--trust_region_decay", "1"], "--trust_region_decay 1 must be in [0, 1)"),
    (["--policy", "A2C", "--rms_alpha", "1"], "--rms_alpha 1 must be in (0, 1)"),
    (["--policy", "A2C", "--reward_scale", "0"], "--reward_scale 0 must be in (0, 1e+06]"),
    (["--policy", "ACER", "--recurrent"], "--recurrent applies to A2C and A3C, not ACER"),
    (["--policy", "A2C", "--no_trust_region"], "--no_trust_region applies to ACER, not A2C"),
    (["--policy", "A2C", "--encoder", "a3c"], "--encoder applies to A3C, not A2C"),
])
def test_ranges_and_owners_come_from_the_declarations(args, words):
    with pytest.raises(UsageError) as e:
        ac_main.build_config(ac_main.parse([*args, "--quiet"]))
    assert words in str(e.value) and "\n" not in str(e.value)


def test_a_record_without_a_newer_setting_is_the_same_experiment_as_one_at_its_default():
    """Records and checkpoints written before a setting was recorded (e.g. A2C's optimizer, reward_scale, recurrent)
    resume and count as finished: what they do not name is the default. A setting that differs still refuses."""
    full = A2CSettings().record()
    old = {k: v for k, v in full.items() if k not in ("optimizer", "reward_scale", "recurrent")}
    saved, current = {"policy": "A2C", "algo": old}, {"policy": "A2C", "algo": full}
    check_compatible(saved, current, Path("x.pt"))
    check_compatible({"policy": "DIFF_A2C", "algo": old}, {"policy": "DIFF_A2C", "algo": full}, Path("x.pt"))
    changed = {**full, "reward_scale": 0.1}
    with pytest.raises(UsageError, match=r"was made with --reward_scale 1.0, this run has 0.1"):
        check_compatible(saved, {"policy": "A2C", "algo": changed}, Path("x.pt"))
    assert filled(ACERSettings, {"lr": 1e-3})["action_std"] == 0.3  # continuous ACER's, recorded only when given
    assert defaults(A3CSettings)["encoder"] == "nature"


def test_the_committed_on_policy_records_read_as_their_settings():
    """Every committed record of an on-policy run (written before the settings were typed) names only settings its
    algorithm declares, so it is read with the rest at their defaults."""
    records = [p for p in (ROOT / "Learning Curves").rglob("*.json") if p.is_file()]
    checked = 0
    for path in records:
        try:
            config = json.loads(path.read_text()).get("config", {})
        except (ValueError, AttributeError):
            continue
        policy = config.get("policy", "")
        algorithm = next((a for a in ALGORITHM_SETTINGS if policy.endswith(a)), None)
        if algorithm is None or not isinstance(config.get("algo"), dict):
            continue
        names = {f.name for f in fields(ALGORITHM_SETTINGS[algorithm])}
        assert set(config["algo"]) <= names, (path, sorted(set(config["algo"]) - names))
        ALGORITHM_SETTINGS[algorithm](**{k: v for k, v in filled(ALGORITHM_SETTINGS[algorithm],
                                                                  config["algo"]).items()}).check()
        checked += 1
    assert checked >= 20


def parser_of(script) -> argparse.ArgumentParser:
    """The parser a script's ``parse`` builds (stopped before it reads argv)."""
    captured = {}

    def grab(self, args=None, namespace=None):
        captured["parser"] = self
        raise SystemExit

    original = argparse.ArgumentParser.parse_args
    argparse.ArgumentParser.parse_args = grab
    try:
        script.parse([])
    except SystemExit:
        pass
    finally:
        argparse.ArgumentParser.parse_args = original
    return captured["parser"]


@pytest.mark.parametrize("name", ["DASE_main", "sac_main", "ac_main"])
def test_each_script_takes_the_flags_it_took_before_the_settings_were_typed(name):
    """tests/script_flags.json: every entry script's flags when they were written by hand (2026-11-28); generating
    them from the settings classes neither dropped nor added one. Flags added since are listed here."""
    import importlib

    added = {"ac_main": ["--eval_policy", "--env_backend"],  # 2026-11-29, issues 65 and 66
             "DASE_main": ["--ensemble_q", "--ensemble_q_sample", "--noisy", "--noisy_sigma0", "--normalize_obs",
                           "--action_noise", "--curiosity", "--curiosity_strength", "--rnd", "--rnd_strength",
                           "--rnd_n_sample"],
             "sac_main": ["--ensemble_q", "--ensemble_q_sample", "--noisy", "--noisy_sigma0", "--normalize_obs",
                          "--action_noise", "--curiosity", "--curiosity_strength", "--rnd", "--rnd_strength",
                          "--rnd_n_sample"]}
    for script in ("DASE_main", "sac_main"):  # 2026-11-29, issue 67 item 5: replay learners on images
        added[script] += ["--image_features", "--siamese", "--siamese_use_q"]
    for script in added:  # 2026-12-06: float32 denormals as zero (docs/performance.md)
        added[script] += ["--flush_denormals"]
    added["sac_main"] += ["--deterministic_noise"]  # 2026-12-06: the paper's SAC code's noise (docs/experiments.md)
    parser = parser_of(importlib.import_module(name))
    flags = sorted(o for a in parser._actions for o in a.option_strings)
    assert flags == sorted(json.loads((ROOT / "tests" / "script_flags.json").read_text())[name] + added.get(name, []))


def test_td3_and_ddpg_have_their_papers_defaults_and_refuse_each_others_flags():
    import DASE_main
    from utils.run.replay.settings import DDPGSettings, TD3Settings

    td3, ddpg = TD3Settings(), DDPGSettings()
    assert (td3.tau, td3.hidden, td3.actor_lr, td3.critic_lr, td3.policy_freq) == (0.005, (256, 256), 3e-4, 3e-4, 2)
    assert (ddpg.tau, ddpg.hidden, ddpg.actor_lr, ddpg.critic_lr) == (0.001, (400, 300), 1e-4, 1e-3)
    cfg = DASE_main.build_config(DASE_main.parse(["--policy", "DDPG", "--hidden_sizes", "64", "32", "--quiet"]))
    assert cfg.algo["hidden"] == [64, 32] and cfg.algo["tau"] == 0.001 and "policy_noise" not in cfg.algo
    for args, words in [(["--policy", "DDPG", "--policy_noise", "0.1"], "--policy_noise applies to TD3, not DDPG"),
                        (["--policy", "DDPG", "--hidden_sizes", "64"], "DDPG's critic takes exactly two widths"),
                        (["--policy", "TD3", "--hidden_sizes", "64", "0"], "--hidden_sizes 0 must be >= 1"),
                        (["--policy", "TD3", "--tau", "0"], "--tau 0 must be in (0, 1]")]:
        with pytest.raises(UsageError, match=re_escape(words)):
            DASE_main.build_config(DASE_main.parse([*args, "--quiet"]))


def re_escape(text: str) -> str:
    import re

    return re.escape(text)


def test_a_td3_record_from_before_the_typed_settings_is_the_same_experiment():
    """The committed TD3 records name no hidden sizes or learning rates (they were recorded only when given): they
    read as TD3's defaults, which the runs used."""
    from utils.run.replay.settings import TD3Settings

    old = {"discount": 0.99, "tau": 0.005, "policy_noise": 0.2, "noise_clip": 0.5, "policy_freq": 2, "expl_noise": 0.1}
    check_compatible({"policy": "DASE_TD3", "algo": old}, {"policy": "DASE_TD3", "algo": TD3Settings().record()},
                     Path("x.pt"))
    with pytest.raises(UsageError, match="--actor_lr"):
        check_compatible({"policy": "TD3", "algo": old},
                         {"policy": "TD3", "algo": {**TD3Settings().record(), "actor_lr": 1e-3}}, Path("x.pt"))


def test_a_sac_record_without_a_later_setting_is_the_same_experiment_on_either_action_space():
    """SAC's settings are two classes (Box actions, discrete actions): a record that names fewer settings (one
    written before a setting existed) reads the rest as the defaults of the class its keys belong to, so a
    checkpoint of issue 88's SAC runs resumes after a setting is added; a setting of another value is still
    refused by name, and a Box record is never read with the discrete defaults (reward_scale 5, not 1)."""
    import sac_main

    build = lambda *a: sac_main.build_config(sac_main.parse([*a, "--quiet"])).algo  # noqa: E731
    for env in ("Pendulum-v1", "CartPole-v1"):
        full = build("--policy", "SAC", "--env", env)
        older = {k: v for k, v in full.items() if k not in ("hidden_size", "target_update_interval")}
        check_compatible({"policy": "SAC", "algo": older}, {"policy": "SAC", "algo": full}, Path("x.pt"))
        check_compatible({"policy": "SAC", "algo": full}, {"policy": "SAC", "algo": older}, Path("x.pt"))
        with pytest.raises(UsageError, match="--hidden_size"):
            check_compatible({"policy": "SAC", "algo": older},
                             {"policy": "SAC", "algo": {**full, "hidden_size": 64}}, Path("x.pt"))
    box = build("--policy", "DASE_SAC", "--env", "Pendulum-v1")
    without_scale = {k: v for k, v in box.items() if k != "reward_scale"}
    check_compatible({"policy": "DASE_SAC", "algo": without_scale}, {"policy": "DASE_SAC", "algo": box}, Path("x.pt"))
    with pytest.raises(UsageError, match="--reward_scale"):
        check_compatible({"policy": "DASE_SAC", "algo": without_scale},
                         {"policy": "DASE_SAC", "algo": {**box, "reward_scale": 1.0}}, Path("x.pt"))


def test_sac_settings_follow_the_action_space_and_keep_the_records_they_always_had():
    """sac_main.py: SAC on a Box action space (policy_type, alpha fixed by default, reward_scale 5, 20 for Humanoid)
    and discrete SAC (no policy_type, alpha tuned by default towards 0.89 log|A|, reward_scale 1); the records list
    the same keys they always did. --automatic_entropy_tuning has its opposite flag."""
    import sac_main

    build = lambda *a: sac_main.build_config(sac_main.parse([*a, "--quiet"]))  # noqa: E731
    box, disc = build("--policy", "SAC", "--env", "Pendulum-v1"), build("--policy", "SAC", "--env", "CartPole-v1")
    assert set(box.algo) == {"policy_type", "gamma", "tau", "lr", "alpha", "automatic_entropy_tuning",
                             "reward_scale", "hidden_size", "target_update_interval"}
    assert set(disc.algo) == set(box.algo) - {"policy_type"} | {"target_entropy_scale"}
    assert (box.algo["automatic_entropy_tuning"], box.algo["reward_scale"]) == (False, 5.0)
    assert (disc.algo["automatic_entropy_tuning"], disc.algo["reward_scale"], disc.algo["target_entropy_scale"]) == \
        (True, 1.0, 0.89)
    assert build("--policy", "SAC", "--env", "Humanoid-v5").algo["reward_scale"] == 20.0
    assert build("--policy", "SAC", "--env", "CartPole-v1", "--no_automatic_entropy_tuning").algo[
        "automatic_entropy_tuning"] is False
    with pytest.raises(UsageError, match="--target_entropy_scale applies to SAC \\(discrete actions\\)"):
        build("--policy", "SAC", "--env", "Pendulum-v1", "--target_entropy_scale", "0.5")


@pytest.mark.parametrize("name", ["DASE_main", "sac_main", "ac_main"])
def test_every_flag_but_the_scripts_own_is_a_field_of_a_settings_class(name):
    """The flags each script declares by hand are only its own few (policy, step budgets, the tutorial's); every
    other flag is generated from a settings class, with that class's default in the parsed flags or None (a flag
    several algorithms share: each its own)."""
    import importlib

    from utils.naming import settings_owners
    from utils.run.replay.settings import ImageSettings, SequenceSettings, VtraceSettings
    from utils.run.settings import OnPolicyRunSettings, ReplaySettings, RunSettings
    from utils.run.sharing import GraphSettings, SharingSettings
    from utils.settings import flag_of, flagged, spec_of

    own = {"DASE_main": {"--policy", "--start_time_steps", "--max_time_steps", "--warmup_actions",
                         "--timelimit_as_terminal", "--episode_eval", "--solved_at", "--solved_window",
                         "--max_episodes"},
           "sac_main": {"--policy", "--start_steps", "--num_steps", "--updates_per_step"},
           "ac_main": {"--policy", "--max_time_steps", "--start_time_steps", "--task_per_env"}}[name]
    parsed = {"DASE_main": [RunSettings, ReplaySettings, SharingSettings, SequenceSettings, ImageSettings],
              "sac_main": [RunSettings, ReplaySettings, SharingSettings, SequenceSettings, VtraceSettings,
                           ImageSettings],
              "ac_main": [OnPolicyRunSettings, GraphSettings]}[name]
    algorithms = settings_owners(f"{name}.py").values()
    declared, by_class = {}, set()
    for cls in [*parsed, *algorithms]:
        for f in flagged(cls):
            spec = spec_of(cls, f.name)
            default = f.default if cls in parsed else None  # the algorithms' flags: None, each its own default
            for flag in filter(None, (flag_of(cls, f.name), spec.off_flag)):
                assert flag not in declared or (cls not in parsed and flag not in by_class), f"{flag} twice"
                declared[flag] = default if flag != spec.off_flag else None
                if cls in parsed:
                    by_class.add(flag)
    parser = parser_of(importlib.import_module(name))
    flags = {o: a for a in parser._actions for o in a.option_strings}
    assert set(flags) - {"-h", "--help"} == own | set(declared)
    for flag, default in declared.items():
        assert flags[flag].default == default, flag


def test_the_sharing_flags_choices_are_the_library_s_own():
    import DASE_main
    from algorithms.sharing.weights import PRECISIONS, SIMILARITIES
    from utils.naming import DIFFUSION_WEIGHTS, TOPOLOGIES

    actions = {o: a for a in parser_of(DASE_main)._actions for o in a.option_strings}
    assert tuple(actions["--similarity"].choices) == SIMILARITIES
    assert tuple(actions["--kl_precision"].choices) == PRECISIONS
    assert tuple(actions["--topology"].choices) == TOPOLOGIES
    assert tuple(actions["--diffusion_weights"].choices) == DIFFUSION_WEIGHTS


@pytest.mark.parametrize("argv, words", [
    (["--policy", "DASE_TD3", "--dpd_alpha", "2"], "--dpd_alpha/--dpd_batch_size: DASE_TD3 distils nothing"),
    (["--policy", "TD3", "--similarity", "kl"], "TD3 weighs no shared samples"),
    (["--policy", "DIFF_TD3", "--link_drop", "1"], "--link_drop 1 must be in [0, 1)"),
    (["--policy", "DIFF_TD3", "--message_delay", "2"], "give --sync_freq too"),
    (["--policy", "DASE_TD3", "--per_alpha", "0.7"], "apply with --prioritized"),
    (["--policy", "DASE_TD3", "--seq_len", "8"], "--seq_len apply with --seq_encoder"),
    (["--policy", "DASE_TD3", "--seq_encoder", "gru", "--seq_hidden", "5000"], "--seq_hidden 5000 must be in [1, 4096]"),
])
def test_the_run_sharing_and_sequence_flags_are_checked_by_their_classes(argv, words):
    import DASE_main
    from utils.run import validate

    with pytest.raises(UsageError, match=re_escape(words)):
        validate(DASE_main.build_config(DASE_main.parse(["--env", "Pendulum-v1", *argv])))


def test_sac_s_vtrace_flags_are_one_class_recorded_as_before():
    import sac_main

    args = ["--policy", "SAC", "--env", "Pendulum-v1", "--policy_type", "Gaussian", "--n_step", "3"]
    cfg = sac_main.build_config(sac_main.parse([*args, "--vtrace", "--vtrace_c", "0.9"]))
    assert cfg.algo["vtrace"] == [1.0, 0.9, 1.0]
    assert "vtrace" not in sac_main.build_config(sac_main.parse(args)).algo
    for bad, words in ((["--vtrace_lambda", "0.5"], "apply with --vtrace"),
                       (["--vtrace", "--vtrace_lambda", "1.5"], "--vtrace_lambda 1.5 must be in (0, 1]")):
        with pytest.raises(UsageError, match=re_escape(words)):
            sac_main.build_config(sac_main.parse([*args, *bad]))


@pytest.mark.parametrize("script,argv,own,parts", [
    ("DASE_main", ["--policy", "DASE_TD3", "--env", "Pendulum-v1", "--discount", "0.9", "--normalize_obs"],
     {"discount": 0.9, "normalize_obs": True, "ensemble_q": 2}, {"sequence": None, "images": None, "vtrace": None}),
    ("DASE_main", ["--policy", "DDPG", "--env", "Pendulum-v1", "--seq_encoder", "gru", "--seq_len", "8"],
     {"tau": 0.001, "hidden": (400, 300)}, {"sequence": ("gru", 8, 64), "images": None, "vtrace": None}),
    ("sac_main", ["--policy", "SAC", "--env", "Pendulum-v1", "--policy_type", "Gaussian", "--n_step", "3",
                  "--vtrace", "--vtrace_c", "0.9", "--rnd"],
     {"policy_type": "Gaussian", "rnd": True, "rnd_n_sample": 1}, {"sequence": None, "images": None,
                                                                    "vtrace": (1.0, 0.9, 1.0)}),
    ("sac_main", ["--policy", "SAC", "--env", "CartPole-v1"],
     {"target_entropy_scale": 0.89, "automatic_entropy_tuning": True, "reward_scale": 1.0},
     {"sequence": None, "images": None, "vtrace": None}),
    ("ac_main", ["--policy", "ACER", "--env", "Pendulum-v1", "--sdn_samples", "3"],
     {"sdn_samples": 3, "n_steps": 20, "envs_per_agent": 8}, {}),
])
def test_a_runs_algo_record_reads_typed_as_the_classes_it_was_recorded_from(script, argv, own, parts):
    """RunConfig.algo stays the record (the algorithm's keyword arguments); ``algo_settings()`` reads it typed: the
    algorithm's own class (SAC's by action space: the discrete form's on CartPole), the sequence, image and V-trace
    settings apart, each field the record or, where the record leaves it out, its declared default."""
    import importlib

    from utils.naming import ALGORITHM
    from utils.run.replay.settings import DiscreteSACSettings

    module = importlib.import_module(script)
    cfg = module.build_config(module.parse([*argv, "--quiet"]))
    typed = cfg.algo_settings()
    spec = ALGORITHM[cfg.algorithm]
    discrete = "CartPole" in cfg.env
    assert type(typed.own) is spec.form("settings", discrete=discrete)
    assert (type(typed.own) is DiscreteSACSettings) == (cfg.algorithm == "SAC" and discrete)
    for name, value in own.items():
        assert getattr(typed.own, name) == value, name
    declared = {f.name for f in fields(type(typed.own))}
    for name in declared:  # every field: the record's value, else the class's default
        expected = cfg.algo.get(name, defaults(type(typed.own))[name])
        assert getattr(typed.own, name) == expected, name
    if "sequence" in parts:
        seq = parts["sequence"]
        assert (typed.sequence.seq_encoder, typed.sequence.seq_len, typed.sequence.seq_hidden)[:len(seq or ())] == \
            tuple(seq or ()) and (seq is not None) == bool(typed.sequence.seq_encoder)
        assert typed.images is parts["images"] and typed.vtrace == parts["vtrace"]
    assert typed.intrinsic == bool(own.get("rnd"))


def test_a_partial_algo_record_is_the_run_at_the_declared_defaults():
    """What reads ``algo`` through its typed view sees no difference between a record that names every setting and
    one that names only some (a test's, an older record's): the memory estimate, the buffer's discount, the curves'
    side files are those of the defaults, read from the fields, not from literals at each use."""
    from utils.run import RunConfig
    from utils.run.footprint import footprint
    from utils.run.replay.settings import SACSettings, TD3Settings

    for policy, cls in (("DASE_TD3", TD3Settings), ("DASE_SAC", SACSettings)):
        full = RunConfig(policy=policy, env="Pendulum-v1", num_agents=2, algo=cls().record())
        empty = RunConfig(policy=policy, env="Pendulum-v1", num_agents=2, algo={})
        assert [(p.what, p.flags, p.device, p.host) for p in footprint(full)] == \
            [(p.what, p.flags, p.device, p.host) for p in footprint(empty)]
        assert full.algo_settings() == empty.algo_settings()
        assert empty.algo_settings().discount == 0.99 and not empty.algo_settings().intrinsic
    raised = RunConfig(policy="TD3", env="Pendulum-v1", algo={"ensemble_q": 5, "ensemble_q_sample": 2})
    assert ("--ensemble_q", 5) in footprint(raised)[0].flags  # the raised count, as the user spelled it
