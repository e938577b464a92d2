"""The command or config that serves a draft as trained, per engine, as data (`ServeCommand`).

vLLM: `vllm serve TARGET --speculative-config '{...}'` (the draft's ids and flags are read from its
config). SGLang: `python -m sglang.launch_server ... --speculative-algorithm EAGLE3` with the draft's
sliding window as a server flag where its draft class honours one (the aux ids are read from the
draft's `eagle_config`, never from the command). TensorRT-LLM: the `speculative_config` block of the
YAML `trtllm-serve --extra_llm_api_options` reads, with `eagle3_layers_to_capture` in its
output-of-layer convention (the draft's ids are never read). Every flag and field is one of
`serve_args.py`'s, each cited from the engine's own parser; A(k) is the residual stream after k
target layers (vLLM's meaning of id k).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eagle_convert.engines import serve_args as sa
from eagle_convert.engines.producers import fmt_taps
from eagle_convert.engines.reading import DEFAULT, default_taps, ids_for, int_ids, read_draft, window_asked
from eagle_convert.engines.rules import EngineRules
from eagle_convert.jsonable import dump

NUM_SPECULATIVE_TOKENS = 3  # the k a command speculates with when none is given
TRTLLM_CONFIG_FILE = "speculative.yaml"  # the file name the TensorRT-LLM command line names
_PLAIN = re.compile(r"^[A-Za-z0-9_./@:+-]+$")  # a YAML scalar that needs no quotes


@dataclass(frozen=True)
class ServeCommand:
    """One engine release's serving of one draft: the command line, and the config file it names (TRT-LLM)."""

    engine: str  # "vllm" | "sglang" | "trtllm"
    release: str  # the release whose parser the names were read from
    title: str  # "vLLM", "SGLang", "TensorRT-LLM"
    argv: tuple[str, ...]  # the command, one token each
    flags: tuple[tuple[str, Any], ...] = ()  # the engine flags of `argv` and their values, in order
    fields: tuple[tuple[str, Any], ...] = ()  # the config fields (vLLM's JSON keys, TRT-LLM's YAML block)
    config_file: str | None = None  # the YAML file `argv` names (TRT-LLM), whose text is `config_text`
    notes: tuple[str, ...] = ()  # what the command alone cannot do (the draft's own config must be read as trained)

    @property
    def label(self) -> str:
        return f"{self.title} {self.release}"

    @property
    def command(self) -> str:
        """The command line as a shell reads it (vLLM's JSON in single quotes, as its docs write it)."""
        return " ".join(self._quoted())

    def _quoted(self) -> list[str]:
        """`argv` as shell words: quoted only where a shell would read them otherwise."""
        return [t if _PLAIN.match(t) else shlex.quote(t) for t in self.argv]

    def shell_lines(self, width: int = 100) -> list[str]:
        """The command as lines of at most `width` columns that a shell still reads as one command: a
        backslash-newline between tokens; a JSON argument longer than a line broken after a comma
        between its items, and an item longer than a line after its colon (a newline inside single
        quotes is whitespace to JSON). Only a value longer than a line (a long path) makes one longer."""
        tokens = self._quoted()
        lines, line, indent = [], "", "    "
        for token in tokens:
            if not line:
                line = token
            elif len(line) + 1 + len(token) + 2 <= width:
                line += " " + token
            else:
                lines.append(line + " \\")
                line = indent + token
            if len(line) > width and token.startswith("'{") and token.endswith("}'"):
                head, _, _ = line.rpartition(token)
                items = _json_items(token)
                line = head + items[0]
                for item in items[1:]:
                    key, colon, value = item.partition(": ")
                    if len(line) + 1 + len(item) <= width:
                        line += " " + item
                    elif len(indent) + len(item) <= width or not colon:
                        lines.append(line)
                        line = indent + item
                    else:  # an item longer than a line: its value on a line of its own
                        if len(line) + len(key) + 2 <= width:
                            lines.append(f"{line} {key}:")
                        else:
                            lines += [line, f"{indent}{key}:"]
                        line = indent + value
        lines.append(line)
        return lines

    @property
    def config_text(self) -> str | None:
        """The YAML file the command names (None: the command is the whole serving config)."""
        if self.engine != "trtllm":
            return None
        lines = [f"{sa.TRTLLM_BLOCK}:"]
        lines += [f"  {name}: {_yaml(value)}" for name, value in self.fields]
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict[str, Any]:
        fields = {k: (sorted(v) if isinstance(v, (set, frozenset)) else v) for k, v in self.fields}
        keys = "engine release command argv flags fields config_file config_text notes"
        return dump(self, keys, flags=dict(self.flags), fields=fields)


def _yaml(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(str, value)) + "]"
    if isinstance(value, str) and not _PLAIN.match(value):
        return json.dumps(value)  # a JSON string is a YAML double-quoted scalar
    return str(value)


def trained_from_config(config: dict[str, Any], n: int | None) -> tuple[int, ...] | str:
    """The taps vLLM serves the draft with: its top-level ids as A(k), else the default layers."""
    ids = int_ids(config.get("eagle_aux_hidden_state_layer_ids"))
    return tuple(ids) if ids else default_taps(n)


@dataclass(frozen=True)
class Draft:
    """What a serve command needs to know of a draft and where it is served."""

    config: dict[str, Any]
    ref: str  # what the engine loads: a folder or a hub repo id
    target: str | None = None  # the target model (None: TARGET in the command)
    k: int = NUM_SPECULATIVE_TOKENS
    n: int | None = None  # the target's layer count (None: unknown)
    target_class: str | None = None  # the target's architecture (SGLang's offset rule)
    trained: tuple[int, ...] | str | None = None  # A-indices trained on (None: from the config, as vLLM reads it)
    mla: bool | None = None  # None: the config's kv_lora_rank decides (TensorRT-LLM's own test)

    @property
    def taps(self) -> tuple[int, ...] | str | None:
        return self.trained if self.trained is not None else trained_from_config(self.config, self.n)

    @property
    def is_mla(self) -> bool:
        return self.mla if self.mla is not None else bool(self.config.get("kv_lora_rank"))


def vllm_command(draft: Draft, release: str) -> ServeCommand:
    """`vllm serve TARGET --speculative-config '{"method": "eagle3", "model": DRAFT, ...}'`."""
    fields = (("method", "eagle3"), ("model", draft.ref), ("num_speculative_tokens", draft.k))
    spec = json.dumps(dict(fields))
    argv = ("vllm", "serve", draft.target or "TARGET", "--speculative-config", spec)
    return ServeCommand("vllm", release, "vLLM", argv, (("--speculative-config", spec),), fields)


def sglang_command(draft: Draft, rules: EngineRules) -> ServeCommand:
    """`python -m sglang.launch_server` with EAGLE3 as a chain of k steps, and the draft window where it applies."""
    flags: list[tuple[str, Any]] = [
        ("--model-path", draft.target or "TARGET"),
        ("--speculative-algorithm", sa.SGLANG_ALGORITHM),
        ("--speculative-draft-model-path", draft.ref),
        ("--speculative-num-steps", draft.k),
        ("--speculative-eagle-topk", sa.SGLANG_CHAIN_TOPK),
        ("--speculative-num-draft-tokens", draft.k + 1),
    ]
    notes: list[str] = []
    window = window_asked(draft.config)
    if window is not None and rules.window_flag:
        if draft.is_mla and not rules.window_mla:
            notes.append(f"its MLA draft class ignores {rules.window_flag}: the window of {window} is never applied")
        else:
            flags.append((rules.window_flag, window))
    view = read_draft(draft.config, rules, mla=draft.is_mla, target_class=draft.target_class, n=draft.n)
    trained = draft.taps
    if trained is not None and view.taps is not None and view.taps != trained:
        need = ids_for(trained, view.offset, draft.n) if isinstance(trained, tuple) else None
        fix = (
            f"write {rules.aux_ids_path}: {need} (`eagle-convert upgrade --for sglang` writes it)"
            if need is not None
            else "no id list makes it tap these layers"
        )
        notes.append(
            f"{rules.label} reads the aux ids from the draft's {rules.aux_ids_path}, not from this command: it "
            f"taps {fmt_taps(view.taps)}, the draft was trained on {fmt_taps(trained)}; {fix}"
        )
    argv = (*sa.SGLANG_LAUNCH.split(), *(str(t) for pair in flags for t in pair))
    return ServeCommand("sglang", rules.release, rules.title, argv, tuple(flags), notes=tuple(notes))


def trtllm_command(draft: Draft, rules: EngineRules) -> ServeCommand:
    """`trtllm-serve TARGET --extra_llm_api_options speculative.yaml` and that file's `speculative_config`."""
    fields: list[tuple[str, Any]] = [
        ("decoding_type", "Eagle3"),
        ("max_draft_len", draft.k),
        ("speculative_model_dir", draft.ref),
    ]
    notes: list[str] = []
    trained = draft.taps
    if isinstance(trained, tuple):
        need = ids_for(trained, rules.offset, draft.n)
        if need is None:
            notes.append(f"no {rules.aux_ids_serving_key} taps {fmt_taps(trained)} (the output of layer -1 is none)")
        else:
            fields.append((rules.aux_ids_serving_key or "eagle3_layers_to_capture", sorted(need)))
            if need != sorted(need):
                notes.append(
                    f"{rules.label} sorts {rules.aux_ids_serving_key} ({rules.cite('sorted')}): fc sees the states in "
                    f"another order than the draft was trained on ({fmt_taps(trained)})"
                )
    elif trained == DEFAULT:
        notes.append(f"without {rules.aux_ids_serving_key}, {rules.label} taps {rules.default_ids}: the default layers")
    else:
        notes.append(
            f"the layers the draft was trained on are unknown without the target: {rules.aux_ids_serving_key} is not set"
        )
    fields.append(("eagle3_model_arch", sa.TRTLLM_MODEL_ARCH))
    if window_asked(draft.config) is not None:
        notes.append(
            f"{rules.label} has no draft sliding window ({rules.cite('window')}): long contexts draft differently"
        )
    argv = (sa.TRTLLM_SERVE, draft.target or "TARGET", "--extra_llm_api_options", TRTLLM_CONFIG_FILE)
    flags = (("--extra_llm_api_options", TRTLLM_CONFIG_FILE),)
    return ServeCommand(
        "trtllm", rules.release, rules.title, argv, flags, tuple(fields), TRTLLM_CONFIG_FILE, tuple(notes)
    )


def serve_command(draft: Draft, engine: str, release: str | None = None) -> ServeCommand:
    """The serve command of `engine` ("vllm", "sglang", "trtllm") at `release` (None: the newest known)."""
    from eagle_convert.engines.select import ENGINES

    known = ENGINES[engine]
    rel = release or known.newest
    if engine == "vllm":
        return vllm_command(draft, rel)
    if engine == "sglang":
        return sglang_command(draft, known.rules_for(rel))
    return trtllm_command(draft, known.rules_for(rel))


def serve_commands(draft: Draft, engines: Sequence[tuple[str, str | None]]) -> list[ServeCommand]:
    """One serve command per (engine, release), each engine release once, in the order given."""
    seen: dict[tuple[str, str | None], ServeCommand] = {}
    for engine, release in engines:
        seen.setdefault((engine, release), serve_command(draft, engine, release))
    return list(seen.values())


def _json_items(token: str) -> list[str]:
    """A single-quoted JSON object's text split after each top-level item's comma ('{"a": 1, | "b": 2}'):
    where a shell line may end inside the quotes (and after an item's colon, `shell_lines`)."""
    parts, depth, start, quoted = [], 0, 0, False
    for i, ch in enumerate(token):
        if ch == '"' and token[i - 1] != "\\":
            quoted = not quoted
        elif not quoted and ch in "{[":
            depth += 1
        elif not quoted and ch in "}]":
            depth -= 1
        elif not quoted and ch == "," and depth == 1:
            parts.append(token[start : i + 1])
            start = i + 2 if token[i + 1 : i + 2] == " " else i + 1
    parts.append(token[start:])
    # a key and its value may go on two lines too (whitespace after the colon): a long path then fits
    return parts
