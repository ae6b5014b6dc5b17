"""The one registry of methods, algorithms and variants, and how a run is named from them.

A policy is ``{METHOD_}{ALGORITHM}``: the algorithm (DDPG, TD3, SAC; A2C, A3C, ACER) says how one agent learns,
the method how agents share (nothing, experience, distillation, parameters). Command lines, file stems, sweep
and plot are all read from the tables below: a new algorithm is one entry in ``ALGORITHM_SPECS`` (plus its module), a
new way of sharing one entry in ``METHODS`` (plus its scheme).

A run of POLICY on ENV with seed S writes ``{stem}.json`` and one curve per agent: ``{stem}.npy`` for a single
agent, ``{stem}_Agent_{i}.npy`` for multi-agent methods, where ``stem = {POLICY}[_{variant}]_{ENV}_{S}``. The
variant names settings that change what a method is rather than how it is tuned, so runs of both never share
files (``matched``, ``float32``, ``ring``, ``q5m3``, ``gru``, ...): each such setting declares its token on its field,
and utils/run/names.py joins them (``variant_of``) and reads file names back (``CURVE_NAME``).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass


@dataclass(frozen=True)
class Method:
    """A way for agents to share; ``prefix`` is how policies and files name it ('' for independent agents)."""

    prefix: str
    experience: bool = False  # one buffer per seed, external samples down-weighted (DASE)
    distils: bool = False  # own buffers, distillation steps towards peers (DPD)
    diffuses: bool = False  # parameters averaged with the graph neighbours after every update (Diff-DAC)
    default_agents: int = 1
    default_topology: str = "complete"
    summary: str = ""

    @property
    def multi_agent(self) -> bool:
        return self.default_agents > 1

    def policy(self, algorithm: str) -> str:
        return f"{self.prefix}_{algorithm}" if self.prefix else algorithm


# the order is the order of --help and of error messages
METHODS = (
    Method("DASE", experience=True, default_agents=2, summary="one shared buffer, external samples down-weighted"),
    Method("", summary="independent agents (the baseline)"),
    Method("DPD", distils=True, default_agents=2, summary="own buffers, distillation towards peers"),
    Method("DIFF", diffuses=True, default_agents=4, default_topology="ring",
           summary="own buffers, parameters averaged with graph neighbours after every update"),
    Method("DIFF_DASE", experience=True, diffuses=True, default_agents=4, default_topology="ring",
           summary="DASE sharing among neighbours plus parameter diffusion"),
)
METHOD = {m.prefix: m for m in METHODS}


@dataclass(frozen=True)
class Algorithm:
    """How one agent learns, the one entry of an algorithm: its command line, how the loop drives it, which methods
    and action spaces it takes, and where its classes live: its batched learner, its recurrent (``--seq_encoder``) and
    image (pixel tasks) forms, its settings, each with a form for discrete actions where that is another class. The
    classes are named "module:Class" and imported when asked for (``form``): reading the registry imports no torch."""

    name: str
    script: str
    family: str  # "replay": off-policy, updates from a replay buffer; "rollout": on-policy, lockstep batched
    # members; "async": asynchronous worker processes (A3C)
    methods: tuple[str, ...] = tuple(m.prefix for m in METHODS)  # the method prefixes it combines with
    actions: tuple[str, ...] = ("box",)  # action spaces: "box" (bounded continuous) and/or "discrete"
    agents: int = 1  # > 1: agents that learn from each other by the algorithm's own rule (SEAC), its default number
    learner: str = ""  # its batched class (on a Box action space, or on both when no discrete form is named)
    learner_discrete: str = ""
    recurrent: str = ""  # replay learners: the form with a sequence encoder
    recurrent_discrete: str = ""
    image: str = ""  # replay learners: the form on pixel observations
    image_discrete: str = ""
    settings: str = ""  # its settings class (utils/run/*/settings.py)
    settings_discrete: str = ""

    def _path(self, kind: str, discrete: bool) -> str:
        """"module:Class" of ``kind``: the discrete-action form where there is one, else the one form ('' if none)."""
        return (discrete and getattr(self, f"{kind}_discrete")) or getattr(self, kind)

    def form(self, kind: str = "learner", discrete: bool = False) -> type:
        """Its class of ``kind`` (learner, recurrent, image, settings), the discrete-action one where there is one."""
        import importlib

        path = self._path(kind, discrete)
        if not path:
            raise KeyError(f"{self.name} has no {kind} form")
        module, name = path.split(":")
        return getattr(importlib.import_module(module), name)

    def has(self, kind: str, discrete: bool = False) -> bool:
        return bool(self._path(kind, discrete))


_REPLAY, _RUN_REPLAY = "algorithms.replay", "utils.run.replay"
ALGORITHM_SPECS = (
    Algorithm("TD3", "DASE_main.py", "replay", learner=f"{_REPLAY}.td3:TD3",
              recurrent=f"{_REPLAY}.sequence_agents:RecurrentTD3", image=f"{_REPLAY}.image_agents:ImageTD3",
              settings=f"{_RUN_REPLAY}.settings:TD3Settings"),
    Algorithm("DDPG", "DASE_main.py", "replay", learner=f"{_REPLAY}.ddpg:DDPG",
              recurrent=f"{_REPLAY}.sequence_agents:RecurrentDDPG", image=f"{_REPLAY}.image_agents:ImageDDPG",
              settings=f"{_RUN_REPLAY}.settings:DDPGSettings"),
    Algorithm("SAC", "sac_main.py", "replay", actions=("box", "discrete"),  # discrete: Christodoulou's SAC
              learner=f"{_REPLAY}.sac:SAC", learner_discrete=f"{_REPLAY}.discrete_sac:DiscreteSAC",
              recurrent=f"{_REPLAY}.sequence_agents:RecurrentSAC",
              recurrent_discrete=f"{_REPLAY}.sequence_agents:RecurrentDiscreteSAC",
              image=f"{_REPLAY}.image_agents:ImageSAC", image_discrete=f"{_REPLAY}.image_agents:ImageDiscreteSAC",
              settings=f"{_RUN_REPLAY}.settings:SACSettings",
              settings_discrete=f"{_RUN_REPLAY}.settings:DiscreteSACSettings"),
    Algorithm("A2C", "ac_main.py", "rollout", methods=("", "DIFF"), actions=("discrete", "box"),
              learner="algorithms.onpolicy.a2c:A2C", settings="utils.run.onpolicy.settings:A2CSettings"),
    Algorithm("A3C", "ac_main.py", "async", methods=("",), actions=("discrete", "box"),
              learner="algorithms.onpolicy.a3c:ActorCritic", settings="utils.run.onpolicy.settings:A3CSettings"),
    Algorithm("ACER", "ac_main.py", "rollout", methods=("",), actions=("discrete", "box"),
              learner="algorithms.onpolicy.acer_continuous:ContinuousACER",  # Wang et al.'s continuous ACER
              learner_discrete="algorithms.onpolicy.acer:ACER", settings="utils.run.onpolicy.settings:ACERSettings"),
    Algorithm("SEAC", "ac_main.py", "rollout", methods=("",), actions=("discrete", "box"), agents=2,
              learner="algorithms.onpolicy.seac:SEAC", settings="utils.run.onpolicy.settings:SEACSettings"),
)
ALGORITHM = {a.name: a for a in ALGORITHM_SPECS}
ALGORITHMS = {a.name: a.script for a in ALGORITHM_SPECS}  # algorithm -> command line
TOPOLOGIES = ("complete", "ring", "star", "none")
DIFFUSION_WEIGHTS = ("uniform", "metropolis")
WEIGHTS_SUFFIX = "_weights"  # {curve stem}_weights.npy: the DASE sharing weights of that curve
CONSENSUS_SUFFIX = "_consensus"  # {stem}_consensus.npy: the agents' parameter disagreement per evaluation
TASKS_SUFFIX = "_tasks"  # {curve stem}_tasks.npy: --eval_tasks all, that agent's score on every agent's task
GOSSIP_SUFFIX = "_gossip"  # {curve stem}_gossip.npy: --sync_freq, [skipped fraction, mean message age] per evaluation
SIAMESE_SUFFIX = "_siamese"  # {curve stem}_siamese.npy: --siamese, the mean auxiliary loss per evaluation
INTRINSIC_SUFFIX = "_intrinsic"  # {curve stem}_intrinsic.npy: --curiosity/--rnd, [mean bonus, model loss] per evaluation
EPISODES_SUFFIX = "_episodes"  # {curve stem}_episodes.csv: the actor-critic family's training episodes
EPISODE_EVAL_SUFFIX = "_episode_eval"  # {curve stem}_episode_eval.npy: --episode_eval, [episode, step, return] rows

# each command line's RunConfig fields that it spells otherwise (the paper's scripts' spellings)
SCRIPT_FLAG_NAMES = {"DASE_main.py": {},
                     "sac_main.py": {"max_time_steps": "num_steps", "start_time_steps": "start_steps"},
                     "ac_main.py": {}}
SCRIPT_POLICIES = {script: tuple(m.policy(a.name) for m in METHODS for a in ALGORITHM_SPECS
                                 if a.script == script and m.prefix in a.methods)
                   for script in SCRIPT_FLAG_NAMES}


def settings_owners(script: str) -> dict[str, type]:
    """The settings classes of a script's algorithms by the name its --help and errors give them: the algorithm's,
    or "SAC (continuous actions)" and "SAC (discrete actions)" where the action spaces have their own classes."""
    out: dict[str, type] = {}
    for a in ALGORITHM_SPECS:
        if a.script != script:
            continue
        if a.settings_discrete:
            out[f"{a.name} (continuous actions)"] = a.form("settings")
            out[f"{a.name} (discrete actions)"] = a.form("settings", discrete=True)
        else:
            out[a.name] = a.form("settings")
    return out


def parse_policy(policy: str) -> tuple[Method, str] | None:
    """(method, algorithm) of a policy name, or None for an unknown one."""
    for m in sorted(METHODS, key=lambda m: len(m.prefix), reverse=True):
        head = f"{m.prefix}_" if m.prefix else ""
        algorithm = ALGORITHM.get(policy[len(head):]) if policy.startswith(head) else None
        if algorithm is not None and m.prefix in algorithm.methods:
            return m, algorithm.name
    return None


def method_of(policy: str) -> Method:
    """The method of a known policy (independent agents for an unknown one, which validation refuses)."""
    parsed = parse_policy(policy)
    return parsed[0] if parsed else METHOD[""]


def algorithm_of(policy: str) -> str:
    parsed = parse_policy(policy)
    return parsed[1] if parsed else policy


def with_diffusion(policy: str) -> str | None:
    """The policy with parameter diffusion added (``--diffusion``), or None where the method has none."""
    parsed = parse_policy(policy)
    if parsed is None:
        return None
    method, algorithm = parsed
    if method.diffuses:
        return policy
    combined = {"": "DIFF", "DASE": "DIFF_DASE"}.get(method.prefix)
    return METHOD[combined].policy(algorithm) if combined in ALGORITHM[algorithm].methods else None


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
    """Several agents per seed: a sharing method's, or an algorithm whose agents learn from each other (SEAC)."""
    algorithm = ALGORITHM.get(algorithm_of(policy))
    return method_of(policy).multi_agent or (algorithm is not None and algorithm.agents > 1)


def default_num_agents(policy: str) -> int:
    """2 for DASE_ and DPD_ policies and SEAC, 4 for DIFF_ (a ring), 1 for the baselines."""
    algorithm = ALGORITHM.get(algorithm_of(policy))
    return max(method_of(policy).default_agents, algorithm.agents if algorithm is not None else 1)


def adjacency_token(matrix) -> str:
    """The variant token of an explicit adjacency matrix: 'adj' and 8 hex digits of its hash."""
    text = json.dumps([[int(x) for x in row] for row in matrix], separators=(",", ":"))
    return "adj" + hashlib.sha1(text.encode()).hexdigest()[:8]


def default_init(policy: str) -> str:
    """--init's default: agents of a seed start equal ("common") under diffusion, as Diff-DAC's reference starts
    its learners; otherwise each from its own seed ("separate")."""
    return "common" if method_of(policy).diffuses else "separate"


def run_stem(policy: str, env: str, seed: int | str, variant: str = "") -> str:
    """``{policy}[_{variant}]_{env}_{seed}``; a namespaced id's slash becomes a dash (ALE/Pong-v5: ALE-Pong-v5)."""
    return f"{policy}{'_' + variant if variant else ''}_{env.replace('/', '-')}_{seed}"


def curve_names(stem: str, policy: str, num_agents: int) -> list[str]:
    """The curve file stems of one run: {stem} or {stem}_Agent_{i}."""
    return [f"{stem}_Agent_{i}" for i in range(num_agents)] if is_multi_agent(policy) else [stem]


def curve_length(max_time_steps: int, eval_freq: int) -> int:
    """Evaluations in a finished run: one at step 0, then one every eval_freq steps."""
    return max_time_steps // eval_freq + 1
