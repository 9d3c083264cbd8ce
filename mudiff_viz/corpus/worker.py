"""Decode one page task into store rows: the one code path of the in-process runner and the Ray actors.

A :class:`PageDecoder` holds the run's settings and, through the model registry's per-process
cache, its models: an actor loads them once and decodes page after page. It sets the number of
intra-op threads itself, because CPU float reductions differ with the thread count and confidences
are stored to 4 significant digits: the same pages give the same rows only under the same count.
Nothing here raises for a bad page: a failure becomes a failed row with its one-line error.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass, field

import torch

from models.registry import load_backend
from mudiff_viz.core.peak_memory import own_peak_rss_mb
from mudiff_viz.core.limits import Limits
from mudiff_viz.corpus.grid import Variant, make_variant
from mudiff_viz.corpus.rows import failed_rows, one_line_error, page_rows
from mudiff_viz.corpus.sources import SourceFile
from mudiff_viz.decoding.decoders import get_decoder
from mudiff_viz.decoding.pipeline import decode_page, make_params

Rows = dict[str, list[dict]]


@dataclass(frozen=True)
class DecodeConfig:
    """What every worker of a run decodes with (picklable: it travels to Ray actors)."""

    run_id: str
    models: dict[str, str]  # decoder -> model spec
    knobs: dict = field(default_factory=dict)
    dpi: float = 150.0
    threads: int = 1  # intra-op threads per worker
    limits: Limits = field(default_factory=Limits)


@dataclass(frozen=True)
class PageTask:
    """One page variant to decode with some decoders (those not in the store yet)."""

    source: SourceFile
    page_index: int
    variant: Variant
    decoders: tuple[str, ...]

    @property
    def page_id(self) -> str:
        return page_id(self.source.sha256, self.page_index, self.variant)


def page_id(sha256: str, page_index: int, variant: Variant) -> str:
    """Stable across runs and machines: the file's content, the page and the variant (not the path)."""
    return f"{sha256[:16]}/p{page_index + 1}/{variant.label}"


def process_usage() -> dict:
    """This process's peak memory and CPU seconds (its own and its finished children's: the PDF
    worker processes), what a run reports per worker."""
    me, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"peak_rss_mb": own_peak_rss_mb(),
            "cpu_s": me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime}


def merge_rows(parts: list[Rows]) -> Rows:
    out: Rows = {}
    for rows in parts:
        for table, items in rows.items():
            out.setdefault(table, []).extend(items)
    return out


def base_row(config: DecodeConfig, task: PageTask, decoder: str) -> dict:
    """The key and variant columns of a pages row."""
    src, v = task.source, task.variant
    return {"run_id": config.run_id, "page_id": task.page_id, "decoder": decoder, "source": src.path,
            "source_sha256": src.sha256, "page_index": task.page_index, "level": v.level, "occlusion": v.occlusion,
            "degrade": v.degrade, "seed": v.seed, "variant": v.label, "model": config.models[decoder]}


def task_failed(config: DecodeConfig, task: PageTask, error: str) -> Rows:
    """Every requested decoder of a task failed alike (a bad page, a worker that died)."""
    return merge_rows([failed_rows(base_row(config, task, d), error) for d in task.decoders])


class PageDecoder:
    def __init__(self, config: DecodeConfig):
        torch.set_num_threads(config.threads)
        self.config = config
        self.params = make_params(config.limits, **{**config.knobs, "record": True})

    def load_models(self) -> None:
        """Load every decoder's model now (an actor does this once, before its first page)."""
        for decoder, spec in self.config.models.items():
            load_backend(spec, get_decoder(decoder).backend_kind)

    def decode(self, task: PageTask, data: bytes) -> Rows:
        """Rows of every requested decoder for one page variant; failures become failed rows."""
        src = task.source
        if src.kind == "unreadable":
            return task_failed(self.config, task, src.error)
        try:
            vp = make_variant(data, src.path, task.page_index, task.variant, self.config.dpi, src.gt_text,
                              self.config.limits)
        except Exception as exc:  # the page itself is bad: every decoder fails alike
            return task_failed(self.config, task, one_line_error(exc))
        out = []
        for decoder in task.decoders:
            base = base_row(self.config, task, decoder)
            try:
                trace = decode_page(vp.page, model=self.config.models[decoder], decoder=decoder, params=self.params)
                out.append(page_rows(base, trace, vp.gt_text))
            except Exception as exc:
                out.append(failed_rows(base, one_line_error(exc)))
        return merge_rows(out)
