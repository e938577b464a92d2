"""The serve command in validate's report, and a deployment's SGLang / TensorRT-LLM serve config checked.

`serve_draft` is what every engine's serve command is built from: the draft as vLLM's newest release
reads it (the draft as trained, `engines.trained_taps`), the target's depth and class, the k.
`given_findings` compares a deployment's own serve config (`--serve-config FILE`, read by
`engines.read_serve_file`) with the command that serves the draft as trained: algorithm, draft path,
k, the layers TensorRT-LLM captures and SGLang's draft window. A serve config that sets what W334
(TensorRT-LLM's capture layers) or W337 (SGLang's window) asks for settles that finding.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eagle_convert.engines import (
    SGLANG_ALGORITHM,
    Draft,
    EngineRules,
    GivenServe,
    ServeCommand,
    serve_command,
    sglang_flag,
    trtllm_field,
)
from eagle_convert.validate.engines import trained_taps
from eagle_convert.validate.findings import Finding, finding


def draft_ref(ref: Any) -> str:
    """What an engine loads for `ref`: a hub repo's id, else the path as given."""
    from eagle_convert.draft import CheckpointRef

    text = str(ref)
    try:
        parsed = CheckpointRef.parse(text)
    except Exception:  # a malformed hf:// text: show it as given
        return text
    return parsed.repo if parsed.is_hub and parsed.repo else text


def serve_draft(opened: Any, view: Any, *, k: int | None = None) -> Draft | None:
    """The `Draft` every serve command of `opened` (`validate.run.OpenedDraft`) is built from; `view`
    is the newest vLLM release's reading (the draft as trained). None: not a draft."""
    from eagle_convert.engines import ENGINES

    if opened.classified is None or view is None:
        return None
    tgt = opened.target.target if opened.target is not None else None
    n = tgt.num_layers if tgt is not None else None
    target_class = tgt.architectures[0] if tgt is not None and tgt.architectures else None
    trained, _source = trained_taps(view, n, ENGINES["sglang"].rules[-1], target_class)
    return Draft(
        config=opened.ckpt.config,
        ref=draft_ref(opened.ref),
        target=draft_ref(tgt.ref) if tgt is not None else None,
        k=k or 3,
        n=n,
        target_class=target_class,
        trained=trained,
        mla=view.attention == "mla" or bool(opened.ckpt.config.get("kv_lora_rank")),
    )


def _same_path(a: str, b: str) -> bool:
    if a.rstrip("/") == b.rstrip("/"):
        return True
    pa, pb = Path(a).expanduser(), Path(b).expanduser()
    return pa.exists() and pb.exists() and pa.resolve() == pb.resolve()


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def given_findings(
    given: GivenServe, draft: Draft, rules: EngineRules, findings: list[Finding]
) -> tuple[list[Finding], list[Finding]]:
    """(new findings, the engine findings the serve config settles) for `given` against `draft`."""
    want = serve_command(draft, rules.engine, rules.release)
    label, src = rules.label, given.source
    out: list[Finding] = []
    if given.engine == "sglang":
        out += _sglang(given, want, draft, rules)
        names = ("--speculative-algorithm", "--speculative-draft-model-path")
    else:
        out += _trtllm(given, want, draft, rules)
        names = ("decoding_type", "speculative_model_dir")
    algorithm = given.get(names[0])
    accepted = (SGLANG_ALGORITHM,) if given.engine == "sglang" else ("Eagle3", "Eagle")
    if algorithm not in accepted:
        out.append(
            finding(
                "E912",
                f"{src}: {names[0]} is {algorithm!r}, not {accepted[0]!r}: {label} does not run this draft as "
                "an EAGLE-3 draft",
                field=names[0],
                fix=f"Set {names[0]} {accepted[0]} ({_cite(given.engine, names[0])}).",
            )
        )
    path = given.get(names[1])
    if not isinstance(path, str) or not path:
        out.append(
            finding(
                "E913",
                f"{src}: no {names[1]}: {label} has no draft to load",
                field=names[1],
                fix=f"Set {names[1]} {draft.ref}.",
            )
        )
    elif not _same_path(path, draft.ref):
        out.append(
            finding(
                "W914",
                f"{src}: {names[1]} is {path!r}, not the draft validated ({draft.ref!r})",
                field=names[1],
                fix=f"Point {names[1]} at this draft, or validate the draft it names.",
            )
        )
    settled = [f for f in findings if _settles(f, given, want, rules)]
    return out, settled


def _cite(engine: str, name: str) -> str:
    arg = sglang_flag(name) if engine == "sglang" else trtllm_field(name)
    return arg.cite if arg else ""


def _sglang(given: GivenServe, want: ServeCommand, draft: Draft, rules: EngineRules) -> list[Finding]:
    out: list[Finding] = []
    flag = rules.window_flag
    wanted = dict(want.flags).get(flag) if flag else None
    got = given.get(flag) if flag else None
    if flag and wanted is None and got not in (None, ""):
        out.append(
            finding(
                "W917",
                f"{given.source}: {flag} {got} gives the draft a sliding window its config does not ask for "
                + ("(its MLA draft class ignores it)" if draft.is_mla else "(it was not trained with one)"),
                field=flag,
                fix=f"Drop {flag}.",
            )
        )
    elif flag and wanted is not None and got not in (None, "") and _int(got) != wanted:
        out.append(
            finding(
                "W917",
                f"{given.source}: {flag} is {got}, the draft's config asks for a window of {wanted}",
                field=flag,
                fix=f"Set {flag} {wanted}.",
            )
        )
    steps = given.get("--speculative-num-steps")
    if steps not in (None, "") and (_int(steps) is None or _int(steps) == 0):
        out.append(
            finding(
                "E916",
                f"{given.source}: --speculative-num-steps is {steps!r}, not a positive integer",
                field="--speculative-num-steps",
                fix=f"Set --speculative-num-steps K ({_cite('sglang', '--speculative-num-steps')}).",
            )
        )
    return out


def _trtllm(given: GivenServe, want: ServeCommand, draft: Draft, rules: EngineRules) -> list[Finding]:
    out: list[Finding] = []
    k = _int(given.get("max_draft_len"))
    if k is None or k <= 0:
        out.append(
            finding(
                "E916",
                f"{given.source}: max_draft_len is {given.get('max_draft_len')!r}: {rules.label} refuses an Eagle "
                "config without a positive max_draft_len (llm_args.py EagleDecodingConfig.validate_eagle_config)",
                field="max_draft_len",
                fix="Set max_draft_len: K.",
            )
        )
    key = rules.aux_ids_serving_key or "eagle3_layers_to_capture"
    wanted = dict(want.fields).get(key)
    got = given.get(key)
    got_ids = sorted(got) if isinstance(got, list) and all(_int(v) is not None for v in got) else None
    if wanted is None:  # the layers trained on are unknown without the target (W334 says so)
        return out
    if got_ids != sorted(wanted):
        trained = ", ".join(str(i + 1) for i in wanted)
        out.append(_capture(given, rules, got, sorted(wanted), f"the draft was trained on A({trained})"))
    return out


def _capture(given: GivenServe, rules: EngineRules, got: Any, wanted: list[int], why: str) -> Finding:
    key = rules.aux_ids_serving_key or "eagle3_layers_to_capture"
    shown = "not set" if got is None else f"{got}"
    return finding(
        "E915",
        f"{given.source}: {key} is {shown}: {rules.label} captures the output of those layers "
        f"({rules.cite('offset')}), but {why}",
        field=key,
        fix=f"Set {key}: {wanted}.",
    )


def _settles(f: Finding, given: GivenServe, want: ServeCommand, rules: EngineRules) -> bool:
    """Whether `given` settles finding `f`, which asks the serving config for something: W334 (TRT-LLM's capture
    layers: E915 replaces it where they are wrong) and W337 (SGLang's window flag, when it is right)."""
    if f.code == "W334" and rules.aux_ids_path is None:
        # the serve config sets the layers right, or E915 says what it sets wrong
        return dict(want.fields).get(rules.aux_ids_serving_key or "") is not None
    if f.code == "W337" and rules.window_flag:
        wanted = dict(want.flags).get(rules.window_flag)
        return wanted is not None and _int(given.get(rules.window_flag)) == wanted
    return False
