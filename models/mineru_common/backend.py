"""What both MinerU backends share: the tokenizer answers the token-text questions, a page is one
text-recognition region, and the two-stage parse's layout prompt and answer format."""

from __future__ import annotations

from models.base import Backend, fingerprint
from models.mineru_common.layout import DEFAULT_LAYOUT_RULES, parse_layout
from models.mineru_common.tasks import layout_region, page_region, task_of, task_region
from models.mineru_common.text import ChatText
from mudiff_viz.core.types import Region, joined_chars


class MinerUBackend(Backend):
    text: ChatText
    straightens = False  # the release and MinerU2.5's client read the page as it is (no deskew, no relighting)

    def regions(self, page) -> list[Region]:
        """The whole page, recognised as text (the layout parse is the pipeline's mode 'layout')."""
        region = page_region(page.width, page.height, page.text)
        if page.lines:  # character boxes: token boxes on the page, occluded words located in the text
            region.gt_chars = joined_chars(page.lines)
        return [region]

    @staticmethod
    def task_of(prompt: str | None) -> str:
        """text, table, formula or layout: which of the client's per-task settings a region gets."""
        return task_of(prompt)

    def token_text(self, token_id: int) -> str:
        return self.text.token_text(token_id)

    def token_texts(self, ids: list[int]) -> list[str]:
        return self.text.token_texts(ids)

    def detokenize(self, ids) -> str:
        return self.text.detokenize(ids)

    def vocabulary(self) -> str:
        vocab = self.text.tok.get_vocab(with_added_tokens=True)
        return fingerprint(f"{i}={t}" for t, i in sorted(vocab.items(), key=lambda kv: kv[1]))

    def task_region(self, page, task: str) -> Region:
        """The whole page read with ``task``'s prompt (text, table, formula or layout)."""
        return task_region(page.width, page.height, task)

    def layout_region(self, page, wording: str) -> Region:
        return layout_region(page.width, page.height, wording)

    def parse_layout(self, text: str, page, rules: str = DEFAULT_LAYOUT_RULES) -> list[Region]:
        return parse_layout(text, page.width, page.height, rules)
