"""The one place that says how a run is named: its file stems, its curve files and their length.

A run of POLICY on ENV with seed S writes ``{stem}.json`` and one curve per agent:
``{stem}.npy`` for a single agent, ``{stem}_Agent_{i}.npy`` for DASE_ and DPD_ runs, where
``stem = {POLICY}[_{variant}]_{ENV}_{S}``. The variant names a setting that changes what a method
is rather than how it is tuned, so runs of both never share files: today only ``matched`` (DASE
weights against the variance of the exploration noise, ``--kl_div_var matched``).
"""
from __future__ import annotations

import re

ALGORITHMS = ("DDPG", "TD3", "SAC")  # the base algorithms; DASE_ and DPD_ prefix them
MULTI_AGENT_PREFIXES = ("DASE_", "DPD_")  # their curves are {stem}_Agent_{i}.npy
VARIANTS = ("matched",)
WEIGHTS_SUFFIX = "_weights"  # {curve stem}_weights.npy: the DASE sharing weights of that curve
# {method_}{alg}{_variant}_{env}_{seed}{_Agent_i}: the variant is tried before the (lazy) environment id
CURVE_NAME = re.compile(r"^(?:(?P<method>DASE|DPD)_)?(?P<alg>DDPG|TD3|SAC)(?:_(?P<variant>" + "|".join(VARIANTS)
                        + r"))?_(?P<env>.+?)_(?P<seed>\d+)(?:_Agent_(?P<agent>\d+))?$")


# each command line's policies, and the RunConfig fields it spells otherwise (the paper's scripts' spellings)
SCRIPT_POLICIES = {"DASE_main.py": ("DASE_TD3", "DASE_DDPG", "TD3", "DDPG", "DPD_TD3", "DPD_DDPG"),
                   "sac_main.py": ("DASE_SAC", "SAC", "DPD_SAC")}
SCRIPT_FLAG_NAMES = {"DASE_main.py": {},
                     "sac_main.py": {"max_time_steps": "num_steps", "start_time_steps": "start_steps"}}


def script_of(policy: str) -> str | None:
    """The command line that trains ``policy``, or None for an unknown policy."""
    return next((script for script, policies in SCRIPT_POLICIES.items() if policy in policies), None)


def flag_name(script: str, field: str) -> str:
    """A RunConfig field as ``script`` spells it on its command line: --max_time_steps or --num_steps."""
    return "--" + SCRIPT_FLAG_NAMES[script].get(field, field)


def other_spellings(script: str) -> dict[str, str]:
    """Flags the other command lines take that ``script`` spells otherwise: {'--max_time_steps': '--num_steps'}
    for sac_main.py, {'--num_steps': '--max_time_steps', ...} for DASE_main.py."""
    fields = {field for names in SCRIPT_FLAG_NAMES.values() for field in names}
    return {flag_name(other, field): flag_name(script, field) for other in SCRIPT_FLAG_NAMES if other != script
            for field in fields if flag_name(other, field) != flag_name(script, field)}


def is_multi_agent(policy: str) -> bool:
    return policy.startswith(MULTI_AGENT_PREFIXES)


def default_num_agents(policy: str) -> int:
    """2 for DASE_ and DPD_ policies, 1 for the baselines."""
    return 2 if is_multi_agent(policy) else 1


def variant_of(flags_or_algo: dict) -> str:
    """The variant a run's settings ask for ('' for the method as published)."""
    return "matched" if str(flags_or_algo.get("kl_div_var", "")).lower() == "matched" else ""


def run_stem(policy: str, env: str, seed: int, variant: str = "") -> str:
    return f"{policy}{'_' + variant if variant else ''}_{env}_{seed}"


def curve_names(stem: str, policy: str, num_agents: int) -> list[str]:
    """The curve file stems of one run: {stem} or {stem}_Agent_{i}."""
    return [f"{stem}_Agent_{i}" for i in range(num_agents)] if is_multi_agent(policy) else [stem]


def curve_length(max_time_steps: int, eval_freq: int) -> int:
    """Evaluations in a finished run: one at step 0, then one every eval_freq steps."""
    return max_time_steps // eval_freq + 1
