"""Tokenizer, special-token ids and the chat prompt, all read from the checkpoint's files.

The tokenizer is ``tokenizer.json`` through the ``tokenizers`` library (no Auto* classes: the
checkpoint's config.json carries ``auto_map`` and would ask to run remote code). The chat template
comes from ``chat_template.jinja`` (or ``chat_template.json``, or ``tokenizer_config.json``), rendered in a jinja2 sandbox;
the documented Qwen2-VL template is the fallback. ``<|image_pad|>`` is expanded here to one token
per merged 28 x 28 patch.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from models.mineru_common.checkpoint import read_json
from models.mineru_common.tasks import SYSTEM_PROMPT
from mudiff_viz.core.errors import ModelLoadError

IMAGE_PAD = "<|image_pad|>"
SPECIAL_STRINGS = {
    "image_pad": IMAGE_PAD,
    "vision_start": "<|vision_start|>",
    "vision_end": "<|vision_end|>",
    "im_start": "<|im_start|>",
    "im_end": "<|im_end|>",
    "endoftext": "<|endoftext|>",
}
CONFIG_KEYS = {
    "image_pad": "image_token_id",
    "vision_start": "vision_start_token_id",
    "vision_end": "vision_end_token_id",
}
STOP_STRINGS = ("endoftext", "im_end")  # the release's stopping criteria
MASK = "<|MASK|>"  # the diffusion model's mask token (the release falls back to it without config.mask_token_id)

FALLBACK_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@dataclass(frozen=True)
class SpecialIds:
    image_pad: int
    vision_start: int
    vision_end: int
    im_start: int
    im_end: int
    endoftext: int | None


class ChatText:
    """Prompt ids for (image, task prompt) and token display text, from one checkpoint's files."""

    def __init__(self, model_dir: Path, config: dict) -> None:
        from tokenizers import Tokenizer

        path = model_dir / "tokenizer.json"
        if not path.is_file():
            raise ModelLoadError(f"{model_dir} has no tokenizer.json")
        try:
            self.tok = Tokenizer.from_file(str(path))
        except Exception as exc:
            raise ModelLoadError(f"cannot read {path}: {str(exc).splitlines()[0]}") from None
        tok_cfg = read_json(model_dir / "tokenizer_config.json", required=False) or {}
        self.ids = self._special_ids(config)
        self.template_source, template = self._template(model_dir, tok_cfg)
        self._template_fn = _compile(template)
        self._text_cache: dict[int, str] = {}

    @property
    def release_stop_order(self) -> tuple[int, ...]:
        """The stop tokens in the order the release's generate searches them (<|endoftext|> first)."""
        return tuple(i for i in (self.ids.endoftext, self.ids.im_end) if i is not None)

    @property
    def stop_ids(self) -> frozenset[int]:
        return frozenset(i for i in (self.ids.endoftext, self.ids.im_end) if i is not None)

    def _special_ids(self, config: dict) -> SpecialIds:
        found: dict[str, int | None] = {}
        for name, text in SPECIAL_STRINGS.items():
            tid = self.tok.token_to_id(text)
            cfg_key = CONFIG_KEYS.get(name)
            cfg_id = config.get(cfg_key) if cfg_key else None
            if tid is None and name != "endoftext":
                raise ModelLoadError(f"the tokenizer has no {text} token")
            if cfg_id is not None and tid is not None and int(cfg_id) != tid:
                raise ModelLoadError(f"config.json {cfg_key}={cfg_id} but the tokenizer maps {text} to {tid}")
            found[name] = tid
        return SpecialIds(**found)  # type: ignore[arg-type]

    def mask_id(self, config: dict) -> int:
        """The mask token id: config.json's ``mask_token_id``, else the tokenizer's ``<|MASK|>`` (as
        the release does). Refused in one line when the two disagree, when neither exists, or when
        the id is also another special token (the image token above all: image slots would be
        read as masks, and masks replaced by image features)."""
        tok_id = self.tok.token_to_id(MASK)
        cfg_id = config.get("mask_token_id")
        if cfg_id is None:
            if tok_id is None:
                raise ModelLoadError(f"config.json has no mask_token_id and the tokenizer has no {MASK} token")
            mask = tok_id
        elif isinstance(cfg_id, bool) or not isinstance(cfg_id, int):
            raise ModelLoadError(f"config.json mask_token_id must be an integer, got {cfg_id!r}")
        elif tok_id is not None and cfg_id != tok_id:
            raise ModelLoadError(f"config.json mask_token_id={cfg_id} but the tokenizer maps {MASK} to {tok_id}")
        elif tok_id is None and not self._is_special(cfg_id):
            shown = self.tok.id_to_token(cfg_id)
            what = f"the ordinary token {shown!r}" if shown is not None else "no token of the tokenizer"
            raise ModelLoadError(f"config.json mask_token_id={cfg_id} is {what} and the tokenizer has no {MASK} "
                                 "token: masks would read as text")
        else:
            mask = cfg_id
        image_cfg = config.get("image_token_id")
        if mask == self.ids.image_pad or (isinstance(image_cfg, int) and mask == image_cfg):
            raise ModelLoadError(f"the mask token id {mask} is also the image token id ({IMAGE_PAD})")
        for name, tid in vars(self.ids).items():
            if tid == mask:
                raise ModelLoadError(f"the mask token id {mask} is also the id of {SPECIAL_STRINGS[name]}")
        return mask

    def _is_special(self, token_id: int) -> bool:
        """Whether ``token_id`` is one of the tokenizer's added special tokens (never text)."""
        added = self.tok.get_added_tokens_decoder().get(token_id)
        return added is not None and added.special

    @staticmethod
    def _template(model_dir: Path, tok_cfg: dict) -> tuple[str, str]:
        path = model_dir / "chat_template.jinja"
        if path.is_file():
            return "chat_template.jinja", path.read_text(encoding="utf-8")
        processor_template = (read_json(model_dir / "chat_template.json", required=False) or {}).get("chat_template")
        if isinstance(processor_template, str) and processor_template.strip():  # older processors save it here
            return "chat_template.json", processor_template
        template = tok_cfg.get("chat_template")
        if isinstance(template, str) and template.strip():
            return "tokenizer_config.json", template
        return "fallback (documented Qwen2-VL template)", FALLBACK_TEMPLATE

    def render(self, prompt: str) -> str:
        """The chat text for one image followed by ``prompt``, ending where the answer starts."""
        messages = [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": prompt}]},
        ]
        try:
            return self._template_fn(messages)
        except Exception as exc:
            raise ModelLoadError(f"the chat template ({self.template_source}) failed: {exc}") from None

    def prompt_ids(self, prompt: str, n_image_tokens: int) -> list[int]:
        """Token ids of the rendered chat with ``<|image_pad|>`` expanded to ``n_image_tokens`` ids."""
        text = self.render(prompt)
        parts = text.split(IMAGE_PAD)
        if len(parts) != 2:
            raise ModelLoadError(
                f"the chat template ({self.template_source}) placed {len(parts) - 1} image placeholders; expected 1"
            )
        before, after = (self.tok.encode(p, add_special_tokens=False).ids for p in parts)
        return before + [self.ids.image_pad] * n_image_tokens + after

    def token_text(self, token_id: int) -> str:
        """Display text of one id (special tokens keep their literal text, e.g. for layout output)."""
        text = self._text_cache.get(token_id)
        if text is None:
            if self.tok.id_to_token(token_id) is None:
                text = f"<{token_id}>"
            else:
                text = self.tok.decode([token_id], skip_special_tokens=False)
            self._text_cache[token_id] = text
        return text

    def token_texts(self, ids: list[int]) -> list[str]:
        """Display text per token of a sequence. Byte-level BPE can split one character over several
        tokens: those tokens get "" and the token that completes the character carries it."""
        out: list[str] = []
        pending: list[int] = []
        for token_id in ids:
            pending.append(token_id)
            text = self.tok.decode(pending, skip_special_tokens=False)
            if text.endswith("\ufffd") and len(pending) < 4:
                out.append("")
                continue
            out.append(text)
            pending = []
        return out

    def detokenize(self, ids: list[int]) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=True)


def _compile(template: str):
    """A sandboxed render function for a chat template (templates are untrusted data)."""
    from jinja2 import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    try:
        compiled = env.from_string(template)
    except TemplateError as exc:
        raise ModelLoadError(f"the chat template does not parse: {exc}") from None

    def render(messages: list[dict]) -> str:
        return compiled.render(messages=messages, add_generation_prompt=True, add_vision_id=False)

    return render
