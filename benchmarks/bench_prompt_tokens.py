"""Where a variant's prompt tokens go: recorded local-model runs replayed without the model.

Replays the actions of an eval run (its `predictions.jsonl`: the tools the model called, with their
arguments, and its answer type) through today's program, runner and tools with a scripted LM, and
tokenizes every prompt with the local model's tokenizer. A prefix cache like the local backend's
(longest cached prefix of an earlier prompt plus its reply, across questions) gives the tokens each
call would evaluate, split by where they sit in the prompt: system message (instructions, fields),
demonstrations, and each input field of the last user message. No LLM runs, so the figure moves
with the prompt, not with the model's choices.

    .venv/bin/python benchmarks/bench_prompt_tokens.py results/local-dev30-s19/full results/local-dev30-s19/spinach

The observations are today's (the tools run again); the actions are the recorded ones, so a prompt
change is measured on the same trajectories.
"""

from __future__ import annotations

import argparse
import bisect
import io
import json
import re
import statistics
import sys
import tempfile
from collections import OrderedDict, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from saga_dspy.config import Settings, apply_offline_env  # noqa: E402
from saga_dspy.lm.llama import LOCAL_PREFIX_CACHE_BYTES  # noqa: E402
from saga_dspy.lm.prefix_cache import admit, common_prefix  # noqa: E402
from saga_dspy.tools.specs import TOOL_NAMES  # noqa: E402

apply_offline_env()

KV_BYTES_PER_TOKEN = 28 * 2 * 256 * 2  # Qwen2.5-1.5B: 28 layers x (K, V) x 2 KV heads x 128 dims x f16
_HEADER = re.compile(r"\[\[ ## (\w+) ## \]\]")
OUTPUT_FIELDS = {
    "next_thought",
    "next_tool_name",
    "next_tool_args",
    "completed",
    "sparql",
    "answer_type_label",
    "answer_type_qid",
    "relevant_pids",
    "complete",
    "problem",
}  # their headers close the last message
_TYPED = re.compile(r"^(.*?)\s*\((Q\d+)\)\s*$")


class Recorder:
    """The scripted LM's engine hook: keeps every call's messages and reply."""

    def __init__(self):
        self.calls: list[tuple[list[dict], str]] = []


def replay_lm(plans, answer_types, recorder: Recorder):
    from helpers.scripted_lm import ScriptedLM, _ScriptedEngine

    class Engine(_ScriptedEngine):
        def _complete_messages(self, messages):
            response = super()._complete_messages(messages)
            recorder.calls.append((list(messages), response.message.parts[0].text))
            return response

    lm = ScriptedLM(plans, answer_types, continues_replies=True)  # as the local backend: a begun reply is continued
    lm._engine_spec = Engine(lm)
    return lm


def chat_text(messages: list[dict]) -> tuple[str, list[tuple[str, int, int]]]:
    """The Qwen chat-template text of `messages` (generation prompt included) and each region's char span:
    `system`, `demo:<field>` (the fields of all earlier user/assistant turns), then the last user message's
    fields, its closing line (`respond`) and, inside its trajectory, each step's `traj:step` (number, thought,
    action), `traj:observation` and `traj:state` (the lines it added to the state, `--set state_in_trajectory=true`)."""
    text, regions = "", []
    begun = messages[-1]["content"] if messages and messages[-1]["role"] == "assistant" else None
    if begun is not None:  # a reply begun for the model (the prefill extract): it continues that message
        messages = messages[:-1]
    for i, m in enumerate(messages):
        head = f"<|im_start|>{m['role']}\n"
        start = len(text) + len(head)
        content = str(m.get("content") or "")
        text += head + content + "<|im_end|>\n"
        if i == 0 and m["role"] == "system":
            regions.append(("system", 0, len(text)))
            continue
        demo = i < len(messages) - 1
        marks = [(mk.group(1), mk.start()) for mk in _HEADER.finditer(content)] or [("user", 0)]
        marks = [("respond" if name in OUTPUT_FIELDS else name, at) for name, at in marks]
        if not demo:
            marks += _inner_marks(content, marks)
        marks.sort(key=lambda mark: mark[1])
        edges = [start - len(head)] + [start + at for _name, at in marks[1:]] + [len(text)]
        for (name, _at), a, b in zip(marks, edges, edges[1:]):
            regions.append((f"demo:{name}" if demo else name, a, b))
    text += "<|im_start|>assistant\n"
    if begun is not None:
        regions.append(("begun", len(text), len(text) + len(begun)))
        text += begun
    return text, regions


_CLOSING = re.compile(r"\n\nRespond with [^\n]*\Z")
_STEP_PARTS = re.compile(r"^(Step \d+$|Observation: |Type context:$|Knowledge log:$)", re.M)


def _inner_marks(content: str, marks: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The last user message's marks inside its fields: a closing line without field markers (the short one) and
    the parts of each step of its trajectory."""
    out = []
    closing = _CLOSING.search(content)
    if closing and all(at < closing.start() for _name, at in marks):
        out.append(("respond", closing.start()))
    starts = [at for name, at in marks if name == "trajectory"]
    if starts:
        end = min([at for _name, at in marks + out if at > starts[0]], default=len(content))
        for mk in _STEP_PARTS.finditer(content, starts[0], end):
            word = mk.group(1)
            part = "step" if word.startswith("Step") else "observation" if word.startswith("Obs") else "state"
            out.append((f"traj:{part}", mk.start()))
    return out


class Tokens:
    def __init__(self, model_path: Path):
        from llama_cpp import Llama

        self.llama = Llama(model_path=str(model_path), vocab_only=True, verbose=False)

        self.sizes: dict[int, int] = {}  # token id -> bytes of its text

    def __call__(self, text: str) -> list[int]:
        return self.llama.tokenize(text.encode(), add_bos=False, special=True)

    def counter(self, text: str, ids: list[int]):
        """For a char offset of `text`, how many of its tokens `ids` end at or before it (one tokenization of the
        whole prompt, not one of each prefix: a region's tokens are those that end inside it)."""
        ends, at = [], 0
        for token in ids:
            if token not in self.sizes:
                self.sizes[token] = len(self.llama.detokenize([token], special=True))
            at += self.sizes[token]
            ends.append(at)
        return lambda char: bisect.bisect_right(ends, len(text[:char].encode()))


class PrefixCacheModel:
    """The local backend's reuse: the live KV prefix (last call) or the longest prefix among saved states, an LRU
    bounded in bytes (`capacity`: None for unbounded); a state costs `fixed` bytes plus `per_token` per token."""

    def __init__(self, capacity: int | None, fixed: int, per_token: int):
        self.capacity, self.fixed, self.per_token = capacity, fixed, per_token
        self.states: OrderedDict[tuple[int, ...], None] = OrderedDict()
        self.live: list[int] = []

    def reused(self, ids: list[int]) -> int:
        best = max(self.states, key=lambda k: common_prefix(ids, k), default=None)
        if best is not None:
            self.states.move_to_end(best)
        return max(common_prefix(ids, self.live), common_prefix(ids, best) if best is not None else 0)

    def save(self, ids: list[int]) -> None:
        self.live = ids
        admit(self.states, tuple(ids), None, lambda key, _state: self.fixed + self.per_token * len(key), self.capacity)


def replayed_calls(run_dir: Path, limit: int | None = None, ids: list[str] | None = None, **settings: object):
    """Each recorded question of an eval run, replayed through today's program: (record, [(messages, reply)])."""
    from saga_dspy.eval.running.runner import evaluate

    config = json.loads((run_dir / "config.json").read_text())
    records = [json.loads(line) for line in (run_dir / "predictions.jsonl").open()]
    records = [r for r in records if r["id"] in ids] if ids else records[:limit]
    plans, answer_types = {}, {}
    for r in records:
        plans[r["question"]] = [
            (s["tool_name"], s["tool_args"]) for s in r["trajectory"] if s["tool_name"] in TOOL_NAMES
        ] + [("stop", {})]
        m = _TYPED.match(r.get("answer_type") or "")
        answer_types[r["question"]] = (m.group(1), m.group(2)) if m else (r.get("answer_type") or "thing", "")
    replay = Settings(
        dataset=config["dataset"],
        split=config["split"],
        variant=config["variant"],
        max_steps=10,
        lm_cache=False,
        mlflow=False,
        **settings,
    )
    recorder = Recorder()
    with tempfile.TemporaryDirectory() as out:
        for r in records:  # one question at a time, so the calls are attributed to it
            recorder.calls.clear()
            evaluate(
                replay,
                [config["variant"]],
                out=Path(out) / r["id"],
                ids=[r["id"]],
                lm=replay_lm(plans, answer_types, recorder),
                progress=False,
                stream=io.StringIO(),
            )
            yield r, list(recorder.calls)


def measure(
    run_dir: Path,
    tokens: Tokens,
    cache: PrefixCacheModel,
    limit: int | None,
    **settings: object,
):
    variant = json.loads((run_dir / "config.json").read_text())["variant"]
    per_question: dict[str, dict[str, int]] = {}
    for r, calls in replayed_calls(run_dir, limit, **settings):
        split: dict[str, int] = defaultdict(int)
        for messages, reply in calls:
            text, regions = chat_text(messages)
            ids = tokens(text)
            reused = cache.reused(ids)
            split["prompt"] += len(ids)
            split["evaluated"] += len(ids) - reused
            split["calls"] += 1
            length = tokens.counter(text, ids)
            for name, a, b in regions:  # the evaluated tokens that fall in this region
                lo, hi = length(a), length(b)
                evaluated = max(0, hi - max(lo, reused))
                split[f"eval:{name}"] += evaluated
                if name.startswith("demo:"):
                    split["eval:demos"] += evaluated
            cache.save(ids + tokens(reply))
        per_question[r["id"]] = dict(split)
    return variant, per_question


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="eval run directories (predictions.jsonl, config.json)")
    parser.add_argument("--limit", type=int, default=None, help="first N questions of each run")
    parser.add_argument(
        "--cache-bytes",
        type=int,
        default=LOCAL_PREFIX_CACHE_BYTES,
        help="the state cache's capacity (default: the backend's); 0 for unbounded",
    )
    parser.add_argument(
        "--state-fixed-bytes",
        type=int,
        default=0,
        help="bytes a saved state costs besides its KV cells (llama-cpp-python's logits copy)",
    )
    parser.add_argument(
        "--demo-anchors",
        type=int,
        default=None,
        help="replay with this many demonstrations the same for every question (Settings.demo_anchors)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        help="any other setting of the replay, NAME=VALUE (a JSON value): demos=1, demo_steps=3, ...",
    )
    parser.add_argument(
        "--final-extract",
        default="auto",
        choices=["auto", "call", "prefill", "step", "none"],
        help="Settings.final_extract of the replay (auto: prefill, as with the local model)",
    )
    parser.add_argument(
        "--stable-history",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Settings.stable_history of the replay (default: on, as the program's default)",
    )
    parser.add_argument(
        "--one-cache",
        action="store_true",
        help="one prefix cache across the runs, in the order given (one process over the whole slice); "
        "default: a cold cache per run",
    )
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = parser.parse_args()
    args.cache_bytes = args.cache_bytes or None
    from saga_dspy.lm.model_files import local_model_path

    tokens = Tokens(local_model_path(Settings()))
    report = {}
    cache = PrefixCacheModel(args.cache_bytes, args.state_fixed_bytes, KV_BYTES_PER_TOKEN)
    for run in args.runs:
        if not args.one_cache and run is not args.runs[0]:  # cold, as a fresh process
            cache = PrefixCacheModel(args.cache_bytes, args.state_fixed_bytes, KV_BYTES_PER_TOKEN)
        settings: dict[str, object] = {"final_extract": args.final_extract, "stable_history": args.stable_history}
        if args.demo_anchors is not None:
            settings["demo_anchors"] = args.demo_anchors
        for item in args.set:
            name, _, value = item.partition("=")
            try:
                settings[name] = json.loads(value)
            except ValueError:
                settings[name] = value
        variant, per_question = measure(run, tokens, cache, args.limit, **settings)
        keys = sorted({k for q in per_question.values() for k in q})
        means = {k: round(statistics.mean(q.get(k, 0) for q in per_question.values()), 1) for k in keys}
        report[str(run)] = {
            "variant": variant,
            "questions": len(per_question),
            "mean": means,
            "per_question": per_question,
        }
        print(f"\n{run} ({variant}, {len(per_question)} questions): mean per question")
        for k in keys:
            print(f"  {k:28s} {means[k]:>9.1f}")
    pooled = [q for run in report.values() for q in run["per_question"].values()]
    if len(report) > 1 and pooled:  # every question of every run, one mean
        keys = sorted({k for q in pooled for k in q})
        report["all"] = {
            "questions": len(pooled),
            "mean": {k: round(statistics.mean(q.get(k, 0) for q in pooled), 1) for k in keys},
        }
        print(f"\nall runs ({len(pooled)} questions): mean per question")
        for k in keys:
            print(f"  {k:28s} {report['all']['mean'][k]:>9.1f}")
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
