"""Which EAGLE-3 drafts `upgrade` refuses, each with a one-line reason and a hint.

Refused: no aux hidden states or no fc.weight (nothing for fc_norm to normalise), an fc.weight
that is not [H, A x target_hidden_size], flags that disagree with the tensors, norm_before_fc
drafts (the aux states would be normalised twice), drafts already EAGLE-3.1, and non-float fc.
"""

from __future__ import annotations

from eagle_convert.draft import Checkpoint, DraftInfo
from eagle_convert.errors import UpgradeRefusedError
from eagle_convert.upgrade.norminit import FLOAT_DTYPES


def refuse(ckpt: Checkpoint, what: str, hint: str | None = None, options: tuple[str, ...] = ()) -> UpgradeRefusedError:
    return UpgradeRefusedError(f"{ckpt.description}: {what}", hint=hint, options=options)


def check_upgradable(ckpt: Checkpoint, info: DraftInfo) -> tuple[str, int, int]:
    """(on-disk fc name, A, target hidden size), or the one-line reason the upgrade is refused."""
    inv = {c: k for k, c in info.canonical.items()}
    fc_name = inv.get("fc.weight")
    vcfg = info.view
    if not vcfg.flags["use_aux"]:
        raise refuse(
            ckpt,
            "eagle_config.use_aux_hidden_state is false: the draft fuses no aux hidden states, "
            "so there is nothing for fc_norm to normalise",
        )
    if fc_name is None:
        raise refuse(
            ckpt,
            "no fc.weight tensor, so there is nothing for fc_norm to normalise",
            hint="upgrade needs an EAGLE-3 draft",
        )
    fc, ht = ckpt.tensors[fc_name], info.target_hidden_size
    if len(fc.shape) != 2 or not ht or fc.shape[1] % ht or info.num_aux is None:
        raise refuse(
            ckpt,
            f"{fc_name} {list(fc.shape)} is not [H, A x target_hidden_size ({ht})]",
            hint="fix target_hidden_size in config.json",
        )
    num_aux = fc.shape[1] // ht
    flags = info.flags
    fc_norms = sorted(k for k, c in info.canonical.items() if c.startswith("fc_norm."))

    def where(flag: str) -> str:
        return ", ".join(flags[flag].where) or "default"

    disagree = None
    if fc_norms and not flags["fc_norm"].value:
        disagree = f"{fc_norms[0]} exists but fc_norm is false ({where('fc_norm')})"
    elif flags["fc_norm"].value and not fc_norms:
        disagree = f"fc_norm is true ({where('fc_norm')}) but there is no fc_norm.0.weight"
    elif "input_norm.weight" in inv and not flags["norm_before_fc"].value:
        disagree = f"{inv['input_norm.weight']} exists but norm_before_fc is false ({where('norm_before_fc')})"
    elif flags["norm_before_fc"].value and "input_norm.weight" not in inv:
        disagree = f"norm_before_fc is true ({where('norm_before_fc')}) but there is no input_norm.weight"
    else:
        for key in ("num_aux_hidden_states", "num_aux_layers"):
            declared = vcfg.vcfg.get(key)
            if isinstance(declared, int) and declared != num_aux:
                disagree = (
                    f"{key} is {declared} but {fc_name} width {fc.shape[1]} / target_hidden_size {ht} gives A={num_aux}"
                )
    if disagree:
        raise refuse(
            ckpt,
            f"flags and tensors disagree: {disagree}",
            hint="fix config.json or the weights first; see eagle-convert inspect",
        )
    if flags["norm_before_fc"].value:
        raise refuse(
            ckpt,
            f"is a norm_before_fc draft (input_norm.weight; norm_before_fc set in "
            f"{where('norm_before_fc')}): adding fc_norm would normalise the aux states twice",
            hint="only plain EAGLE-3 drafts upgrade",
        )
    if info.variant == "EAGLE-3.1":
        raise refuse(ckpt, f"already EAGLE-3.1: {'; '.join(info.variant_reasons)}", hint="nothing to upgrade")
    if fc.dtype not in FLOAT_DTYPES:
        raise refuse(ckpt, f"{fc_name} is {fc.dtype}; fc_norm weights need a float dtype ({', '.join(FLOAT_DTYPES)})")
    return fc_name, num_aux, ht
