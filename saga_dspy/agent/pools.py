"""Which demo pool a run uses (`Settings.demo_pool`, `--demo-pool`) and its loading for a variant.

`auto` is the dataset's own bundled pool where there is one, else the graph's shared pool (every bundled
train pool, `scripts/build_demos.py`); `shared`, `none`, a bundled pool's name or a JSONL path choose
another. A bundled pool is the file the variant's own tools recorded (`<name>.<variant>.jsonl`) where there
is one, else the full variant's `<name>.jsonl` rendered as the variant's tools show it (agent.demo_views).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from saga_dspy.agent.demos import DemoPool
from saga_dspy.config import Settings
from saga_dspy.kg.flavours import flavour_for
from saga_dspy.variants import Variant, variant_of

log = logging.getLogger(__name__)

SHARED_POOL = "shared"  # `--demo-pool shared`: the graph's shared pool (`Flavour.shared_demo_pool`)


SHARED_POOL_VARIANT = Settings.model_fields[
    "variant"
].default  # its pool is `<dataset>.jsonl`, every variant's fallback


def pool_file_name(dataset: str, variant: str = SHARED_POOL_VARIANT, picks: bool = False) -> str:
    """`<dataset>.<variant>.jsonl`: demos recorded with that variant's own tools (SPINACH-mode
    observations for `spinach`); the default variant's pool is plain `<dataset>.jsonl`. `picks`: the pool whose
    questions end by picking a shown candidate where one answers (`<dataset>[.<variant>].picks.jsonl`)."""
    name = dataset if variant == SHARED_POOL_VARIANT else f"{dataset}.{variant}"
    return f"{name}.picks.jsonl" if picks else f"{name}.jsonl"


def excluded_sources(settings: Settings) -> tuple[str, ...]:
    """`Settings.demo_pool_exclude` as benchmark names."""
    return tuple(dict.fromkeys(s.strip() for s in settings.demo_pool_exclude.split(",") if s.strip()))


@dataclass(frozen=True)
class PoolChoice:
    """The pool `Settings.demo_pool` names: `name` ('shared', a dataset, 'file' or 'none') and its file
    for the variant (None for 'none'); `own`: the file was recorded by the variant's own tools."""

    name: str
    path: Path | None
    own: bool = False


def _is_pool_name(choice: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z0-9_\-]+", choice))


def choose_pool(settings: Settings, variant: str | None = None) -> PoolChoice:
    """Which pool file the run uses: `auto` is the dataset's own pool where one is bundled, else the graph's
    shared one (`Flavour.shared_demo_pool`; none on a graph without); `shared`; `none`; a bundled pool's name
    (`qald10`); or a JSONL path. A bundled pool is the file the variant's own tools recorded where there is one
    (`<name>.<variant>.jsonl`), else `<name>.jsonl`; with `Settings.demo_picks`, for a variant that shows candidates,
    the picks pool (`<name>[.<variant>].picks.jsonl`) in their place."""
    choice = settings.demo_pool.strip() or "auto"
    base = Path(settings.data_dir) / "demos"
    shared = flavour_for(settings.kg).shared_demo_pool
    if choice == "auto":
        choice = settings.dataset if (base / pool_file_name(settings.dataset)).is_file() else shared or "none"
    if choice == SHARED_POOL:
        choice = shared or ""
    if choice in ("none", ""):
        return PoolChoice(choice or SHARED_POOL, None)
    if not _is_pool_name(choice):
        return PoolChoice("file", Path(choice))
    name = variant or settings.variant
    picks = settings.demo_picks and shows_candidates(settings, name)
    # the variant's own recordings first (its picks pool, then, for a variant other than the default, its plain one)
    own = [pool_file_name(choice, name, True)] if picks else []
    if name != SHARED_POOL_VARIANT or not picks:
        own.append(pool_file_name(choice, name))
    for file in own:
        if (base / file).is_file():
            return PoolChoice(choice, base / file, own=True)
    return PoolChoice(choice, base / pool_file_name(choice, picks=picks))


def shows_candidates(settings: Settings, variant: str) -> bool:
    """Whether `variant`'s lookups show candidate queries on this graph (`Settings.shown_candidates` > 0)."""
    flags = variant_of(variant).grounding
    return flags.shows_candidates and flavour_for(settings.kg).proposes_queries and settings.shown_candidates > 0


def check_pool_choice(settings: Settings) -> None:
    """A ValueError, said before any work starts, when `Settings.demo_pool` names no pool that exists."""
    choice = choose_pool(settings)
    if choice.name == SHARED_POOL and choice.path is None:
        raise ValueError(f"--demo-pool shared: no shared demo pool is bundled for {settings.kg}")
    if choice.path is not None and not choice.path.is_file():
        bundled = sorted({p.name.split(".")[0] for p in (Path(settings.data_dir) / "demos").glob("*.jsonl")})
        what = "file" if choice.name == "file" else f"bundled pool (one of: {', '.join(bundled) or 'none'})"
        raise ValueError(f"--demo-pool {settings.demo_pool}: no such {what}: {choice.path}")


def load_demo_pool(
    settings: Settings,
    pool: DemoPool | str | Path | Iterable[dict] | None = None,
    *,
    spinach: bool = False,
    variant: Variant | None = None,
) -> DemoPool:
    """The pool given (object, file, or records), else the one `Settings.demo_pool` names (`choose_pool`).

    For a variant: its own recording of that pool when one exists (used as it is), else the full variant's
    rendered as the variant's tools show it (agent.demo_views); an empty pool for `none` or a missing file.
    Records of the benchmarks in `Settings.demo_pool_exclude` are left out."""
    if isinstance(pool, DemoPool):
        return pool
    options: dict[str, Any] = {
        "observation_chars": settings.demo_observation_chars,
        "steps": settings.demo_steps,
        "state_in_steps": settings.state_in_trajectory,
        "compact": settings.compact_observations,
        "exclude": excluded_sources(settings),
    }
    if isinstance(pool, (str, Path)):
        return DemoPool.from_file(pool, spinach=spinach, variant=variant, **options)
    if pool is not None:
        return DemoPool(pool, spinach=spinach, variant=variant, **options)
    choice = choose_pool(settings, variant.name if variant is not None else None)
    shown = _relative(choice.path, Path(settings.data_dir)) if choice.path is not None else None
    if choice.path is None or not choice.path.is_file():
        log.info("no demo pool (%s); the controller runs without demonstrations", choice.path or choice.name)
        return DemoPool([], spinach=spinach, name=choice.name, path=shown)
    if choice.own and variant is not None:  # recorded by the variant's tools: nothing to render
        log.info("demo pool: %s (recorded by the %s variant's tools)", choice.path, variant.name)
        spinach = spinach or not variant.agent.schema_controller
        pool = DemoPool.from_file(choice.path, spinach=spinach, name=choice.name, **options)
    else:
        pool = DemoPool.from_file(choice.path, spinach=spinach, variant=variant, name=choice.name, **options)
    pool.path = shown
    return pool


def _relative(path: Path, root: Path) -> Path:
    """`path` relative to the data directory when it lies under it (no machine paths in run records)."""
    try:
        return path.resolve().relative_to(root.resolve())
    except ValueError:
        return path


__all__ = [
    "SHARED_POOL",
    "SHARED_POOL_VARIANT",
    "PoolChoice",
    "check_pool_choice",
    "choose_pool",
    "excluded_sources",
    "load_demo_pool",
    "pool_file_name",
]
