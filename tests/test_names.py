"""File names from the fields (utils/run/names.py): each setting that names files declares its token on its field;
the variant and the pattern that reads curve names back are generated from them. Today's names must not change: a
table of them by setting, every committed record's stem, every committed curve file's parse."""
import json
from dataclasses import fields
from pathlib import Path

import pytest

from utils.run.names import CURVE_NAME, TOKENS, variant_of
from utils.settings import spec_of

ROOT = Path(__file__).resolve().parent.parent
CURVES = ROOT / "Learning Curves"

# settings (by field name) -> the variant every run made with them has carried so far
TODAY = [
    ({}, None, ""),
    ({"kl_div_var": "matched"}, None, "matched"),
    ({"kl_div_var": 0.1, "kl_precision": "float32"}, None, "float32"),
    ({"topology": "complete"}, None, ""),
    ({"topology": "ring", "diffusion_weights": "metropolis", "kl_div_var": "matched"}, None, "matched_ring_metropolis"),
    ({"topology": "ring", "adjacency": [[0, 1], [1, 0]]}, None, "adjcfc6c8c7"),
    ({"topology": "star", "link_drop": 0.1}, None, "star_drop0.1"),
    ({"sync_freq": 5, "message_delay": 2.0}, None, "sync5_delay2"),
    ({"sync_freq": 5, "message_delay": 1.0}, None, "sync5"),
    ({"task_per_env": 4}, "A2C", "tasks4"),
    ({"ensemble_q": 10, "ensemble_q_sample": 2}, None, "q10m2"),
    ({"ensemble_q": 5, "ensemble_q_sample": 5}, None, "q5"),
    ({"ensemble_q": 2, "ensemble_q_sample": 2}, None, ""),
    ({"noisy": True, "noisy_sigma0": 0.5}, None, "noisy"),
    ({"noisy": True, "noisy_sigma0": 0.3}, None, "noisy0.3"),
    ({"normalize_obs": True, "action_noise": (0.1, 0.3)}, None, "norm_noise0.1-0.3"),
    ({"deterministic_noise": "paper_code", "normalize_obs": True}, "SAC", "norm_papernoise"),
    ({"deterministic_noise": "per_sample"}, "SAC", ""),
    ({"curiosity": "forward", "curiosity_strength": 0.5}, None, "icmforward0.5"),
    ({"rnd": True, "rnd_strength": 2.0, "rnd_n_sample": 4}, None, "rnd2k4"),
    ({"seac_lambda": 0.0, "shared_network": True}, "SEAC", "lambda0_snac"),
    ({"seac_lambda": 1.0}, "SEAC", ""),
    ({"recurrent": True}, "A2C", "lstm"),
    ({"seq_encoder": "gru", "prev_action": True, "use_prediction": True}, "SAC", "gru_prev_pred"),
    ({"siamese": "atc", "siamese_use_q": True}, "SAC", "atcq"),
    ({"init": "separate"}, "DIFF_A2C", "separateinit"),
    ({"init": "common"}, "DIFF_A2C", ""),
    ({"init": "common"}, "DASE_TD3", "commoninit"),
    ({"topology": "none", "init": "separate"}, "DIFF_TD3", "none_separateinit"),
]


@pytest.mark.parametrize("settings, policy, variant", TODAY, ids=[v or "plain" for _, _, v in TODAY])
def test_the_variant_of_each_setting_is_todays(settings, policy, variant):
    assert variant_of(settings, policy) == variant
    if variant:  # and the pattern reads it back from a file name
        m = CURVE_NAME.match(f"{policy or 'TD3'}_{variant}_Pendulum-v1_3")
        assert m is not None and m["variant"] == variant and m["env"] == "Pendulum-v1" and m["seed"] == "3"


def test_every_token_is_declared_on_one_field_with_its_own_rank():
    """The tokens come from the fields: each named field declares one (its spec's token), ranks are distinct, and a
    field the table above names is among them."""
    names = [name for name, _ in TOKENS]
    assert len(set(names)) == len(names) and len({t.rank for _, t in TOKENS}) == len(TOKENS)
    from utils.run.replay.settings import TD3Settings
    from utils.run.sharing import SharingSettings

    declared = {f.name for cls in (SharingSettings, TD3Settings) for f in fields(cls)
                if spec_of(cls, f.name).token is not None}
    assert declared <= set(names) and {"kl_div_var", "topology", "ensemble_q", "noisy", "rnd"} <= declared


def test_every_committed_record_is_named_by_its_settings():
    """Each committed run's record, read back as a RunConfig, gives the stem its files carry (records from before
    --init was recorded say init None: their stem is read against the init their file name states)."""
    from utils.play import recorded_config

    checked = 0
    for path in sorted(CURVES.rglob("*.json")):
        body = json.loads(path.read_text())
        if not isinstance(body, dict) or not isinstance(body.get("config"), dict):
            continue
        config = dict(body["config"])
        if config.get("init") is None and "init_" in path.stem:
            config["init"] = "separate" if "_separateinit_" in path.stem else "common"
        assert recorded_config(config).stem == path.stem, path.relative_to(ROOT)
        checked += 1
    assert checked > 300


def test_every_committed_curve_name_parses_to_its_run():
    """Every curve file of this project's runs parses: policy, variant, environment and seed as its record says."""
    checked = 0
    for path in sorted(CURVES.rglob("*.json")):
        body = json.loads(path.read_text())
        config = body.get("config") if isinstance(body, dict) else None
        if not isinstance(config, dict):
            continue
        for curve in path.parent.glob(f"{path.stem}*.npy"):
            m = CURVE_NAME.match(curve.stem)
            if m is None or m["seed"] != str(config["seed"]) or (curve.stem != path.stem and m["agent"] is None):
                continue  # a file beside the curve (weights, tasks, consensus): not a curve name
            assert (m["method"] + "_" if m["method"] else "") + m["alg"] == config["policy"], curve.name
            assert f"{config['policy']}{'_' + m['variant'] if m['variant'] else ''}_{m['env']}_{m['seed']}" == path.stem
            checked += 1
    assert checked > 300
