"""One settings object for the whole product.

Every CLI flag maps to a field here (`add_settings_args` / `settings_from_args`),
and every field can also come from the environment as `SAGA_<FIELD>`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, get_args, get_origin
from urllib.parse import urlsplit

import platformdirs
from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from saga_dspy.variants import VARIANT_NAMES

PACKAGE_DIR = Path(__file__).resolve().parent

# Offline defaults: no cost-map download, no hub access, no MLflow telemetry (its client starts when
# mlflow is imported, wherever that happens first). (MLflow's trace export is asynchronous and
# flushed at the end of each run: saga_dspy.eval.tracking.tracker.)
OFFLINE_ENV = {
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "DO_NOT_TRACK": "true",
}


def apply_offline_env() -> None:
    for key, value in OFFLINE_ENV.items():
        os.environ.setdefault(key, value)


def default_data_dir() -> Path:
    """`data/` of a source checkout, else the copy a wheel carries as `saga_dspy/_data`."""
    checkout = PACKAGE_DIR.parent / "data"
    return checkout if checkout.is_dir() else PACKAGE_DIR / "_data"


if TYPE_CHECKING:  # a Literal built from a tuple is read at run time only
    Variant = str
else:
    Variant = Literal[VARIANT_NAMES]  # the names of saga_dspy.variants' one table

WDQS = "https://query.wikidata.org/sparql"
QLEVER_WIKIDATA = "https://qlever.cs.uni-freiburg.de/api/wikidata"

# `--kg-preset NAME`: a live knowledge graph in one flag. Each entry gives settings a run would otherwise need
# several flags for; a flag or SAGA_ variable given explicitly wins. The schema index is the bundled one:
# Wikidata's own property constraints (P2302) as read when the sample was built (`--schema-index FILE` for one
# that `python -m saga_dspy.schema build` wrote for the endpoint).
KG_PRESETS: dict[str, dict[str, Any]] = {
    "wikidata-live": {
        "kg": "wikidata",
        "endpoint": WDQS,
        "search": "wikidata-api",
        "freeze_on_first_use": True,
        "schema_index": "bundled",
    },
    "qlever-wikidata": {
        "kg": "wikidata",
        "endpoint": QLEVER_WIKIDATA,
        "search": "wikidata-api",
        "freeze_on_first_use": True,
        "schema_index": "bundled",
    },
}
BUNDLED_SCHEMA_INDEX = Path("schema") / "wikidata-sample.json.gz"  # under data_dir


def header_value_problem(value: str) -> str | None:
    """Why `value` cannot be an HTTP header value (a line break or another control character, text beyond
    Latin-1 such as a lone surrogate), or None."""
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return "must not contain line breaks or other control characters"
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        return "must be Latin-1 text (an HTTP header value)"
    return None


# the knowledge graph named where none is given (a setting, a function's argument): the bundled sample's
DEFAULT_KG: Final = "wikidata"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="SAGA_", extra="ignore")

    # --- knowledge graph -------------------------------------------------
    kg: Literal["wikidata", "freebase"] = Field(DEFAULT_KG, description="which knowledge graph")
    endpoint: str = Field("embedded", description="'embedded' (bundled sample) or a SPARQL endpoint URL")
    search: str = Field(
        "auto",
        description="entity search: 'auto' (Wikidata's API for wikidata.org endpoints, the bundled index for the "
        "embedded sample, refused for any other URL), 'local', 'wikidata-api', or a wbsearchentities API URL",
    )
    data_dir: Path = Field(default_factory=default_data_dir, description="bundled data directory")
    cache_dir: Path = Field(
        default_factory=lambda: Path(platformdirs.user_cache_dir("saga-dspy")),
        description="cache directory (store, result cache, model)",
    )
    query_timeout: float = Field(20.0, gt=0, allow_inf_nan=False, description="deadline per SPARQL query, seconds")
    row_cap: int = Field(1000, ge=1, description="at most this many rows are kept from a result")
    max_result_bytes: int = Field(
        32 * 2**20, ge=1, description="a result whose values hold more bytes is refused as too large (add LIMIT)"
    )
    result_cache: bool = Field(True, description="cache successful query results on disk")
    http_retries: int = Field(3, ge=1, description="attempts on 429 / 5xx / connection errors")
    embedded_workers: int = Field(2, ge=1, description="worker processes for the embedded store")
    max_query_chars: int = Field(20_000, ge=1, description="longer SPARQL queries are refused before any parsing")
    worker_memory_mb: int = Field(
        4096, ge=0, description="address-space limit of one embedded-store worker, MB (0: none)"
    )
    worker_cpu_seconds: float = Field(
        120.0,
        ge=0,
        allow_inf_nan=False,
        description="CPU-time limit of one query in an embedded-store worker (0: none)",
    )
    user_agent: str = Field(
        "saga-dspy/0.1 (https://github.com/saga-dspy/saga-dspy; research KGQA agent)",
        description="HTTP User-Agent (query.wikidata.org requires one)",
    )
    kg_preset: Literal[tuple(KG_PRESETS)] | None = Field(  # type: ignore[valid-type]
        None,
        description="a live graph in one flag: wikidata-live (query.wikidata.org, Wikidata's search API, gold "
        "frozen on first use, the bundled schema index) or qlever-wikidata (the same over QLever's Wikidata); "
        "flags given explicitly win",
    )
    freeze_on_first_use: bool = Field(
        False,
        description="on a live endpoint, freeze a split's gold when a run first needs it (the embedded sample "
        "always does); off: a run without frozen gold stops and names the freeze-gold command",
    )
    preflight: bool = Field(
        True,
        description="before the first question, check that the LM answers one tiny request and the endpoint "
        "answers ASK {}; a failure stops the run with one line (exit 2)",
    )

    # --- schema and grounding -------------------------------------------
    schema_index: Path | None = Field(None, description="schema index JSON (default: the bundled one)")
    lexicon: str = Field(
        "bundled",
        description="grounding lexicon mined from train questions: 'bundled' (data/lexicon/<kg>.json.gz), "
        "'none' (grammar only), or a file",
    )
    filter_mode: Literal["closure", "bare", "calibrated", "paper"] = Field(
        "closure",
        description="domain check through the subclass closure, the paper's bare instance-of intersection, "
        "calibrated (the closure without hub classes), or paper (the reading of Eq. 3 that reproduces the paper's "
        "Table 9; schema/compat.py); the paper variants use paper whatever this says",
    )
    schema_coverage: int = Field(100, ge=0, le=100, description="share of formal constraints kept (0/25/50/75/100)")
    coverage_seed: int = Field(0, description="seed of the coverage mask")
    observation_chars: int = Field(3000, ge=1, description="character budget of one tool observation")
    shown_candidates: int = Field(
        1,
        ge=0,
        le=5,
        description="candidate queries the lookup shows, ranked and executed (saga_dspy.proposer); 0: none shown",
    )

    # --- agent ----------------------------------------------------------------
    variant: Variant = Field("full", description="ablation variant")
    max_steps: int = Field(15, ge=1, description="ReAct steps per question")
    check_answer: bool = Field(False, description="run the CheckAnswer step (beyond the paper)")
    demos: int = Field(
        2,
        description="controller demonstrations selected per question (0: none; 2: a whole solved "
        "question and a lookup step, 3 adds the query step)",
    )
    demo_anchors: int = Field(
        2,
        ge=0,
        description="of those demonstrations, this many are the same for every "
        "question and shown first (the pool's shortest solved "
        "questions), so a local model's prefix cache evaluates them once",
    )
    demo_observation_chars: int = Field(
        500,
        ge=80,
        description="each observation inside a demonstration's trajectory "
        "is clipped to this many characters (the demos are the "
        "larger part of a local model's evaluated prompt)",
    )
    demo_steps: int = Field(
        8,
        ge=1,
        description="a demonstration's trajectory shows at most its last this many steps before the step it "
        "demonstrates (its decisive ones)",
    )
    demo_pool: str = Field(
        "auto",
        description="the controller's demo pool: auto (the dataset's own where one is bundled, else shared), "
        "shared (every bundled Wikidata train pool), none, a bundled pool's name (qald10) or a JSONL file",
    )
    demo_picks: bool = Field(
        True,
        description="for a variant that shows candidate queries: the pool recorded with them shown "
        "(<name>.picks.jsonl), whose solved questions end by picking a shown candidate that answers as the gold "
        'query does (stop {"candidate": N}) and by writing the query otherwise',
    )
    demo_pool_exclude: str = Field(
        "",
        description="benchmarks whose records are left out of the demo pool, comma-separated: a record goes "
        "when any benchmark's train split it comes from is named (--demo-pool shared --demo-pool-exclude qald10: "
        "QALD-10 as a benchmark without a pool)",
    )
    stable_history: bool = Field(
        True,
        description="the trajectory keeps every step whole while it fits its budget and "
        "then summarises older steps a block of five at a time, so a local "
        "model's prefix cache keeps them (off: the paper's window, the last "
        "five steps whole, which re-writes an older step at every step)",
    )
    state_in_trajectory: bool = Field(
        True,
        description="the type context and knowledge log are no input fields after the trajectory, read again at "
        "every step: the lines a step added to them are written once, after its observation (the prompt of a "
        "question only grows, so a local model's prefix cache evaluates each line once)",
    )
    closing_line: Literal["dspy", "short"] = Field(
        "short",
        description="the line that ends each prompt, after the trajectory: DSPy's (the output fields with their "
        "markers and types, ~90 tokens a controller call) or short (their names, ~15)",
    )
    compact_observations: bool = Field(
        True,
        description="the trajectory shows each observation without what the controller was measured not to act on "
        "(agent.compact): search hits past the third, result rows past the tenth, the property list past ten "
        "names, wordy guidance; ids, labels, types and the schema annotations stay",
    )
    final_extract: Literal["auto", "call", "prefill", "step", "none"] = Field(
        "auto",
        description="when the steps end without an answering query: DSPy ReAct's extract predictor (call: "
        "its own prompt, the trajectory read again), the controller's own prompt with the reply "
        "begun up to the query (prefill: a local model evaluates only the last lines), one more "
        "controller turn told to write the final query (step: the model may pick another tool), "
        "or no LM call (none: the last executed query); auto: prefill with the local model, "
        "call with a served one (not every server continues a begun reply)",
    )
    program: Path | None = Field(None, description="compiled program JSON to load")

    # --- language model ---------------------------------------------------
    lm: str = Field("local", description="'local' (bundled Qwen2.5-Coder-1.5B) or a dspy/litellm model string")
    api_base: str | None = Field(None, description="OpenAI-compatible server URL")
    api_key: SecretStr | None = Field(None, description="API key for the server")
    temperature: float = Field(0.0, ge=0, allow_inf_nan=False, description="sampling temperature")
    max_tokens: int = Field(512, ge=1, description="generation cap per LM call (always applied)")
    seed: int = Field(0, description="LM seed")
    lm_cache: bool = Field(True, description="cache LM responses on disk")
    context_window: int = Field(8192, ge=1, description="local model context window, tokens")
    write_markers: bool = Field(
        True,
        description="local model: the engine writes a chat-format reply's field "
        "markers (fixed by the prompt) in a batch; the model writes the values",
    )
    write_choices: bool = Field(
        True,
        description="local model: where the prompt lists a field's values (the tool's name), the engine writes the "
        "rest of the one value the model's first tokens begin, and the next marker",
    )
    write_arguments: bool = Field(
        True,
        description="local model: a controller reply's tool arguments end where their JSON object closes, and the "
        'engine writes the object\'s opening ({"query": ") where the tool named takes one argument',
    )
    thought_tokens: int = Field(
        24,
        ge=0,
        description="local model: a controller reply's next_thought ends after this many tokens (at its last "
        "sentence end before them) and the engine writes the next field's marker; 0: no cap",
    )
    cut_invented_turns: bool = Field(
        True,
        description="local model: a controller reply's next_thought ends where it starts writing an "
        "'Action:' or 'Observation:' of its own (a tool result that never ran)",
    )
    prompt_lookup: int = Field(
        0,
        ge=0,
        description="local model: prompt-lookup decoding drafts up to this many tokens copied from the prompt "
        "(ids, a shown query), checked in one batch; 0: off",
    )
    prefix_store: str = Field(
        "auto",
        description="local model: where evaluated shared prompt prefixes (the instructions and fixed demonstrations "
        "before a question's own message) are kept on disk, so later runs and `ask` restore them instead of "
        "evaluating them again: auto (<cache-dir>/prefix-states), none, or a directory",
    )
    lm_timeout: float = Field(120.0, gt=0, allow_inf_nan=False, description="deadline of one LM request, seconds")
    lm_retries: int = Field(1, ge=0, le=5, description="retries of a failed LM request (transport errors, 5xx)")
    question_budget: float | None = Field(
        600.0,
        gt=0,
        allow_inf_nan=False,
        description="wall-clock seconds per question; past it the agent takes no "
        "more steps and finishes with what it has",
    )

    # --- evaluation -------------------------------------------------------------
    dataset: str = Field("qald10", description="benchmark name")
    split: str = Field("test", description="benchmark split")
    limit: int | None = Field(None, ge=1, description="at most this many questions")
    num_threads: int = Field(1, ge=1, description="questions evaluated in parallel")
    metric_mode: Literal["answers", "rows"] = Field(
        "answers", description="F1 over answer sets or SPINACH's row matching"
    )
    out: Path | None = Field(None, description="output directory of a run")
    mlflow: bool = Field(True, description="track runs in MLflow")
    mlflow_uri: str | None = Field(None, description="MLflow tracking URI (default: sqlite under the cache dir)")
    trace: Literal["all", "sample", "none"] = Field(
        "all", description="DSPy traces in MLflow: every question, every 10th (sample), or none"
    )
    trace_writer: Literal["process", "inline"] = Field(
        "process",
        description="who writes traces to the MLflow store: a child process (the evaluation's threads "
        "do not wait for the store) or mlflow's own export in this process",
    )
    max_infra_failures: int = Field(
        5,
        ge=1,
        description="stop the run after this many questions in a row fail for the infrastructure "
        "(endpoint or LM unreachable / timed out)",
    )

    @model_validator(mode="before")
    @classmethod
    def _apply_kg_preset(cls, data: Any) -> Any:
        """The preset's settings where none was given (a flag or SAGA_ variable wins)."""
        if not isinstance(data, dict) or not data.get("kg_preset"):
            return data
        preset = KG_PRESETS.get(str(data["kg_preset"]))
        if preset is None:
            return data  # the field's own validation names the choices
        out = dict(data)
        for key, value in preset.items():
            if out.get(key) is None:
                if key == "schema_index" and value == "bundled":
                    value = Path(out.get("data_dir") or default_data_dir()) / BUNDLED_SCHEMA_INDEX
                out[key] = value
        return out

    @field_validator("endpoint")
    @classmethod
    def _endpoint_is_embedded_or_http(cls, value: str) -> str:
        if value.strip().lower() == "embedded":
            return value
        url = urlsplit(value.strip())
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"endpoint must be 'embedded' or an http(s):// SPARQL URL with a host, not {value!r}")
        return value.strip()

    @field_validator("cache_dir", "data_dir", "schema_index", "program", "out", mode="after")
    @classmethod
    def _home_expanded(cls, value: Path | None) -> Path | None:
        """`~/x` is the user's home, as a shell would expand it (a quoted `SAGA_CACHE_DIR='~/…'` is not)."""
        return value.expanduser() if value is not None else None

    @field_validator("prefix_store")
    @classmethod
    def _store_is_a_directory(cls, value: str) -> str:
        if value in ("auto", "none"):
            return value
        path = Path(value).expanduser()
        if not value.strip() or (path.exists() and not path.is_dir()):
            raise ValueError(f"prefix_store must be auto, none or a directory, not {value!r}")
        return str(path)

    @field_validator("user_agent")
    @classmethod
    def _header_safe(cls, value: str) -> str:
        if problem := header_value_problem(value):
            raise ValueError(f"user_agent {problem}")
        return value

    @property
    def is_embedded(self) -> bool:
        return self.endpoint.strip().lower() == "embedded"

    @property
    def on_bundled_sample(self) -> bool:
        """The embedded store over the bundled Wikidata sample (which the bundled schema index describes)."""
        return self.is_embedded and self.kg == "wikidata"


SECRET_FIELDS = ("api_key",)


def secret_value(value: Any) -> str | None:
    """The plain text of a secret, whether it is a `str` or a pydantic `SecretStr` (None stays None)."""
    if value is None:
        return None
    getter = getattr(value, "get_secret_value", None)
    return getter() if callable(getter) else str(value)


def recorded_command(module: str) -> list[str]:
    """The command a run record keeps: `python -m module` and the argv, secrets redacted; the interpreter's path
    (a machine's, not the run's) left out."""
    return ["python", "-m", module, *redact_argv(sys.argv[1:])]


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command line with the values of secret flags (`--api-key X`, `--api-key=X`) replaced by ***."""
    flags = {_flag(name) for name in SECRET_FIELDS}
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append("***")
            hide_next = False
        elif arg in flags:
            out.append(arg)
            hide_next = True
        elif arg.split("=", 1)[0] in flags and "=" in arg:
            out.append(arg.split("=", 1)[0] + "=***")
        else:
            out.append(arg)
    return out


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


# the language model's settings, as every command that calls one offers them (in this order)
LM_FLAGS = (
    "lm",
    "api_base",
    "api_key",
    "temperature",
    "max_tokens",
    "seed",
    "lm_cache",
    "context_window",
    "write_markers",
    "write_choices",
    "write_arguments",
    "thought_tokens",
    "cut_invented_turns",
    "prompt_lookup",
    "prefix_store",
    "lm_timeout",
    "lm_retries",
    "question_budget",
)


# Settings no run command offers as a flag: where the bundled data lives and the tuning of the store and the
# transport (their SAGA_ variables set them)
NOT_RUN_FLAGS = frozenset(
    {
        "data_dir",
        "row_cap",
        "max_result_bytes",
        "http_retries",
        "embedded_workers",
        "max_query_chars",
        "worker_memory_mb",
        "worker_cpu_seconds",
    }
)


def run_flags(*, own: Iterable[str] = ()) -> tuple[str, ...]:
    """The settings a command that runs the agent over questions (eval, optimize) offers as flags, in the model's
    order: every field but `NOT_RUN_FLAGS`, less `own`, those the command sets its own way."""
    unknown = set(own) - set(Settings.model_fields)
    if unknown:
        raise KeyError(f"not a settings field: {', '.join(sorted(unknown))}")
    skip = NOT_RUN_FLAGS | set(own)
    return tuple(name for name in Settings.model_fields if name not in skip)


def add_settings_args(
    parser: argparse.ArgumentParser, names: Iterable[str], defaults: dict[str, Any] | None = None
) -> None:
    """Add one flag per named Settings field; help text and type come from the field. `defaults`: a command's own
    default for a field (optimize compiles on train, not on the settings' test split), shown in --help and set
    when the flag is not given; the other flags are left out of the namespace when not given."""
    defaults = defaults or {}
    for name in names:
        info = Settings.model_fields[name]
        annotation = info.annotation
        shown = str(defaults[name]).replace("%", "%%") if name in defaults else _default_text(name)
        kwargs: dict[str, Any] = {
            "dest": name,
            "default": defaults.get(name, argparse.SUPPRESS),
            "help": info.description
            if "(default" in str(info.description)
            else f"{info.description} (default: {shown})",
        }
        if annotation is bool:
            parser.add_argument(_flag(name), action=argparse.BooleanOptionalAction, **kwargs)
            continue
        args = [a for a in get_args(annotation) if a is not type(None)]
        if get_origin(annotation) is Literal:
            kwargs["choices"] = list(get_args(annotation))
        elif args and get_origin(args[0]) is Literal:
            kwargs["choices"] = list(get_args(args[0]))
        elif annotation in (int, float) or (args and args[0] in (int, float)):
            kwargs["type"] = annotation if annotation in (int, float) else args[0]
        parser.add_argument(_flag(name), **kwargs)


def _default_text(name: str) -> str:
    """A field's default as `--help` shows it (secrets never; a factory's value as computed now)."""
    if name in SECRET_FIELDS:
        return "none"
    info = Settings.model_fields[name]
    value = info.get_default(call_default_factory=True)
    env = os.environ.get(f"SAGA_{name.upper()}")
    text = "none" if value is None else str(value)
    text = f"{text}; env SAGA_{name.upper()}={env}" if env is not None else text
    return text.replace("%", "%%")  # argparse %-formats help text


def settings_from_args(args: argparse.Namespace, **extra: Any) -> Settings:
    overrides = {k: v for k, v in vars(args).items() if k in Settings.model_fields}
    overrides.update(extra)
    return Settings(**overrides)
