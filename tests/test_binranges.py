"""The torch-free `.bin` reader: byte ranges equal torch's own bytes, refusals are one line, and
inspect / validate --deep / upgrade / diff of a `.bin` run with torch unimportable."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from eagle_convert.errors import CheckpointReadError
from eagle_convert.io.binranges import read_bin_tensors
from eagle_convert.io.source import LocalSource
from eagle_convert.io.tensordata import tensor_bytes, tensor_torch


def _raw(t: torch.Tensor) -> bytes:
    return t.contiguous().view(-1).view(torch.uint8).numpy().tobytes()


def test_every_tensor_is_the_byte_range_torch_saved(tmp_path: Path) -> None:
    base = torch.arange(24, dtype=torch.float32)
    state = {
        "bf16": torch.randn(3, 5).to(torch.bfloat16),
        "f16": torch.randn(4).half(),
        "i64": torch.arange(7),
        "bool": torch.tensor([True, False, True]),
        "f8": torch.randn(6).to(torch.float8_e4m3fn),  # untyped storage + dtype (_rebuild_tensor_v3)
        "u16": torch.arange(5).to(torch.uint16),
        "param": torch.nn.Parameter(torch.ones(2, 2)),  # _rebuild_parameter
        "slice": base[6:18].view(3, 4),  # contiguous view into a shared storage: offset inside the record
        "whole": base,
        "scalar": torch.tensor(3.5),
        "empty": torch.zeros(0, 4),
    }
    torch.save(state, tmp_path / "pytorch_model.bin")
    src = LocalSource(tmp_path)
    infos = read_bin_tensors(src, "pytorch_model.bin")
    assert list(infos) == list(state)  # pickle order
    dtypes = {
        "bf16": "BF16",
        "f16": "F16",
        "i64": "I64",
        "bool": "BOOL",
        "f8": "F8_E4M3",
        "u16": "U16",
        "param": "F32",
        "slice": "F32",
        "whole": "F32",
        "scalar": "F32",
        "empty": "F32",
    }
    for name, t in state.items():
        info = infos[name]
        assert (info.dtype, info.shape, info.nbytes) == (dtypes[name], tuple(t.shape), t.numel() * t.element_size())
        assert tensor_bytes(src, info) == _raw(t.detach()), name
        back = tensor_torch(src, info)
        assert back.dtype == t.dtype and back.shape == t.shape
        assert _raw(back) == _raw(t.detach()), name


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda p: torch.save({"w": torch.zeros(2, 3).t()}, p),
            "cannot read PyTorch checkpoint (tensor 'w' is saved as a non-contiguous view) "
            "(re-save it with torch.save({k: v.contiguous() ...}) or convert it to safetensors)",
        ),
        (
            lambda p: torch.save({"w": torch.zeros(2)}, p, _use_new_zipfile_serialization=False),
            "cannot read PyTorch checkpoint (not a zip archive: truncated, corrupt, or the pre-1.6 torch format) "
            "(re-download or re-export the file)",
        ),
        (
            lambda p: torch.save({"w": torch.zeros(2), "step": 3}, p),
            "expected a flat dict of tensors (re-save the state dict as plain tensors or convert it to safetensors)",
        ),
        (
            lambda p: torch.save({"model": {"w": torch.zeros(2)}}, p),
            "expected a flat dict of tensors (re-save the state dict as plain tensors or convert it to safetensors)",
        ),
        (
            lambda p: torch.save(
                {"w": torch.zeros(2), "opt": torch.optim.SGD([torch.zeros(1, requires_grad=True)])}, p
            ),
            "refuses to unpickle non-tensor objects (weights_only=True) "
            "(re-save the state dict as plain tensors or convert it to safetensors)",
        ),
        (
            lambda p: p.write_bytes(b"PK\x03\x04 not really a zip"),
            "cannot read PyTorch checkpoint (not a zip archive: truncated, corrupt, or the pre-1.6 torch format) "
            "(re-download or re-export the file)",
        ),
    ],
)
def test_refusals_are_one_line(tmp_path: Path, make, message: str) -> None:
    path = tmp_path / "pytorch_model.bin"
    make(path)
    with pytest.raises(CheckpointReadError) as err:
        read_bin_tensors(LocalSource(tmp_path), "pytorch_model.bin")
    assert str(err.value) == f"{path}: {message}"


def test_a_pickle_never_runs_code(tmp_path: Path) -> None:
    """A global outside the allow-list is refused before it is called (what weights_only guarantees)."""
    import pickle
    import zipfile

    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self):
            return (Path.touch, (marker,))

    torch.save({"w": torch.zeros(2)}, tmp_path / "pytorch_model.bin")
    with zipfile.ZipFile(tmp_path / "pytorch_model.bin") as zf:
        records = {n: zf.read(n) for n in zf.namelist()}
    pkl = next(n for n in records if n.endswith("/data.pkl"))
    records[pkl] = pickle.dumps({"w": Evil()}, protocol=2)
    with zipfile.ZipFile(tmp_path / "pytorch_model.bin", "w", zipfile.ZIP_STORED) as zf:
        for n, data in records.items():
            zf.writestr(n, data)
    with pytest.raises(CheckpointReadError, match="refuses to unpickle non-tensor objects"):
        read_bin_tensors(LocalSource(tmp_path), "pytorch_model.bin")
    assert not marker.exists()


def test_bin_commands_run_without_torch(built_fixtures, tmp_path: Path) -> None:
    """inspect, validate --deep, upgrade and diff of a .bin with `import torch` failing."""
    folder = built_fixtures("vllm-eagle3-fp16-bin")
    out = tmp_path / "up"
    code = (
        "import sys, json\n"
        "sys.modules['torch'] = None  # any `import torch` raises ImportError\n"
        "from eagle_convert.cli.app import main\n"
        "def run(*a):\n"
        "    try:\n"
        "        main(list(a), standalone_mode=False)\n"
        "    except SystemExit as e:\n"
        "        assert not e.code, (a, e.code)\n"
        f"run('inspect', '--json', {str(folder)!r})\n"
        f"run('validate', '--deep', {str(folder)!r})\n"
        f"run('upgrade', {str(folder)!r}, '--out', {str(out)!r})\n"
        f"run('diff', {str(folder)!r}, {str(out)!r})\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    first = proc.stdout[: proc.stdout.index("\n}") + 2]
    assert json.loads(first)["storage"] == "bin"
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "config.json", "model.safetensors"]
