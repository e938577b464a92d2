"""Crafted inputs (issue 22, input side): every one gets one `Error:` line and exit 1 from inspect,
validate, upgrade and diff, never a traceback, a hang or a changed input, and upgrade writes nothing.

Each case is the smallest file that broke a command before: JSON nested 100k deep, integers over
4,300 digits, `__metadata__` of the wrong type, dtypes as lists, shapes of Infinity, symlink loops,
FIFOs, lone surrogates, BOMs, huge or sparse claims, and `.bin` pickles built to exhaust memory.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from eagle_convert.cli.app import main
from fixtures.drafts import FIXTURE_MATRIX, build_draft
from fixtures.mutants import snapshot

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = ("inspect", "validate", "upgrade", "diff")


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    base = tmp_path_factory.mktemp("bases")
    built: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in built:
            built[name] = build_draft(base / name, FIXTURE_MATRIX[name])
        return built[name]

    return get


def header(folder: Path, name: str = "model.safetensors") -> tuple[dict, bytes]:
    raw = (folder / name).read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8 : 8 + n]), raw[8 + n :]


def put_header(folder: Path, raw_header: bytes, data: bytes, name: str = "model.safetensors") -> None:
    (folder / name).write_bytes(struct.pack("<Q", len(raw_header)) + raw_header + data)


def edit_header(folder: Path, edit: Callable[[dict], None]) -> None:
    hdr, data = header(folder)
    edit(hdr)
    put_header(folder, json.dumps(hdr).encode(), data)


def first_tensor(hdr: dict) -> str:
    return min((k for k in hdr if k != "__metadata__"), key=lambda k: hdr[k]["data_offsets"][0])


def _deep_header(d: Path) -> None:
    hdr, data = header(d)
    put_header(d, json.dumps(hdr).encode()[:-1] + b', "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", data)


def _bigint_header(d: Path) -> None:
    hdr, data = header(d)
    k = first_tensor(hdr)
    put_header(d, json.dumps(hdr).encode().replace(b'"shape": [', b'"shape": [' + b"9" * 5000 + b", ", 1), data)
    assert k


def _surrogate_name(d: Path) -> None:
    hdr, data = header(d)
    k = first_tensor(hdr)
    put_header(d, json.dumps(hdr).encode().replace(json.dumps(k).encode(), b'"\\ud800' + k.encode() + b'"'), data)


def _set_first(field: str, value: object) -> Callable[[Path], None]:
    return lambda d: edit_header(d, lambda h: h[first_tensor(h)].__setitem__(field, value))


def _config(text: str | bytes) -> Callable[[Path], None]:
    def craft(d: Path) -> None:
        raw = text if isinstance(text, bytes) else text.encode()
        (d / "config.json").write_bytes(raw)

    return craft


def _config_field(field: str, value: object) -> Callable[[Path], None]:
    def craft(d: Path) -> None:
        cfg = json.loads((d / "config.json").read_text())
        (d / "config.json").write_text(json.dumps(cfg | {field: value}))

    return craft


def _bom(name: str) -> Callable[[Path], None]:
    return lambda d: (d / name).write_bytes(b"\xef\xbb\xbf" + (d / name).read_bytes())


def _loop(name: str) -> Callable[[Path], None]:
    def craft(d: Path) -> None:
        (d / name).unlink()
        os.symlink(name, d / name)

    return craft


def _trailing(d: Path) -> None:
    hdr, data = header(d)
    put_header(d, json.dumps(hdr).encode(), data + b"\0" * 16)


def _gap(d: Path) -> None:
    hdr, data = header(d)
    for k, v in hdr.items():
        if k != "__metadata__":
            v["data_offsets"] = [v["data_offsets"][0] + 16, v["data_offsets"][1] + 16]
    put_header(d, json.dumps(hdr).encode(), b"\0" * 16 + data)


def _overlap(d: Path) -> None:
    hdr, data = header(d)
    names = sorted((k for k in hdr if k != "__metadata__"), key=lambda k: hdr[k]["data_offsets"][0])
    hdr[names[1]] = dict(hdr[names[0]])  # the second tensor now claims the first one's bytes
    put_header(d, json.dumps(hdr).encode(), data)


def _dup_name(d: Path) -> None:
    hdr, data = header(d)
    k = first_tensor(hdr)
    extra = {"dtype": "F32", "shape": [1], "data_offsets": [len(data), len(data) + 4]}
    raw = json.dumps(hdr).encode()[:-1] + b", " + json.dumps(k).encode() + b": " + json.dumps(extra).encode() + b"}"
    put_header(d, raw, data + b"\0" * 4)


def _sparse(name: str, size: int) -> Callable[[Path], None]:
    def craft(d: Path) -> None:
        with open(d / name, "r+b") as fh:
            fh.truncate(size)  # sparse: claimed, nothing allocated

    return craft


D = "{d}/model.safetensors"
REFETCH = "(re-download or re-export the file)"
LIB = "re-download or re-export the file; the safetensors library refuses"
# (case id, fixture, craft, the Error line with {d} for the crafted folder)
CASES: list[tuple[str, str, Callable[[Path], None], str]] = [
    (
        "deep-header",
        "vllm-eagle3",
        _deep_header,
        f"{D}: corrupt safetensors header: nested deeper than 127 levels {REFETCH}",
    ),
    (
        "deep-config",
        "vllm-eagle3",
        _config('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"),
        "{d}/config.json: nested deeper than 64 levels (fix or regenerate the file)",
    ),
    (
        "deep-index",
        "vllm-eagle3-sharded",
        lambda d: (d / "model.safetensors.index.json").write_text(
            '{"weight_map": {}, "a": ' + "[" * 100_000 + "]" * 100_000 + "}"
        ),
        "{d}/model.safetensors.index.json: nested deeper than 64 levels (fix or regenerate the file)",
    ),
    (
        "bigint-config",
        "vllm-eagle3",
        _config('{"hidden_size": ' + "9" * 5000 + "}"),
        "{d}/config.json: an integer over 4,300 digits (fix or regenerate the file)",
    ),
    (
        "bigint-header",
        "vllm-eagle3",
        _bigint_header,
        f"{D}: tensor 'd2t' has a malformed shape (not a list of non-negative integers) {REFETCH}",
    ),
    (
        "metadata-list",
        "vllm-eagle3",
        lambda d: edit_header(d, lambda h: h.__setitem__("__metadata__", ["pt"])),
        f"{D}: __metadata__ must map strings to strings, got a list (re-export the file; the safetensors library "
        "refuses it)",
    ),
    (
        "metadata-string",
        "vllm-eagle3",
        lambda d: edit_header(d, lambda h: h.__setitem__("__metadata__", "pt")),
        f"{D}: __metadata__ must map strings to strings, got a string (re-export the file; the safetensors library "
        "refuses it)",
    ),
    (
        "metadata-int",
        "vllm-eagle3",
        lambda d: edit_header(d, lambda h: h.__setitem__("__metadata__", 3)),
        f"{D}: __metadata__ must map strings to strings, got an integer (re-export the file; the safetensors "
        "library refuses it)",
    ),
    (
        "metadata-nested",
        "vllm-eagle3",
        lambda d: edit_header(d, lambda h: h.__setitem__("__metadata__", {"format": {"pt": "1"}})),
        f"{D}: __metadata__ must map strings to strings, got a map with a non-string value (re-export the file; the "
        "safetensors library refuses it)",
    ),
    (
        "dtype-list",
        "vllm-eagle3",
        _set_first("dtype", ["I64"]),
        f"{D}: tensor 'd2t' has unknown dtype <list> {REFETCH}",
    ),
    (
        "dtype-dict",
        "vllm-eagle3",
        _set_first("dtype", {"a": 1}),
        f"{D}: tensor 'd2t' has unknown dtype <object> {REFETCH}",
    ),
    (
        "shape-infinity",
        "vllm-eagle3",
        _set_first("shape", [float("inf")]),
        f"{D}: corrupt safetensors header: Infinity is not JSON {REFETCH}",
    ),
    (
        "shape-float",
        "vllm-eagle3",
        _set_first("shape", [128.0]),
        f"{D}: tensor 'd2t' has a malformed shape (not a list of non-negative integers) {REFETCH}",
    ),
    (
        "offsets-string",
        "vllm-eagle3",
        _set_first("data_offsets", ["0", "1024"]),
        f"{D}: tensor 'd2t' has malformed data_offsets (not two non-negative integers) {REFETCH}",
    ),
    (
        "trailing-bytes",
        "vllm-eagle3",
        _trailing,
        f"{D}: 16 bytes after the last tensor's data ({LIB} files its tensors do not cover exactly)",
    ),
    (
        "gap",
        "vllm-eagle3",
        _gap,
        f"{D}: tensor 'd2t' offsets 16..1040 leaves a gap before it; the safetensors library refuses it {REFETCH}",
    ),
    (
        "overlap",
        "vllm-eagle3",
        _overlap,
        f"{D}: tensor 'fc.weight' offsets 0..1024 overlaps the tensor before it; the safetensors library refuses it "
        f"{REFETCH}",
    ),
    (
        "duplicate-name",
        "vllm-eagle3",
        _dup_name,
        f"{D}: tensor 'fc.weight' offsets 1024..25600 leaves a gap before it; the safetensors library refuses it "
        f"{REFETCH}",
    ),
    (
        "bom-config",
        "vllm-eagle3",
        _bom("config.json"),
        "{d}/config.json: starts with a UTF-8 byte-order mark, which transformers and vLLM refuse (save the file as "
        "UTF-8 without BOM)",
    ),
    (
        "bom-index",
        "vllm-eagle3-sharded",
        _bom("model.safetensors.index.json"),
        "{d}/model.safetensors.index.json: starts with a UTF-8 byte-order mark, which transformers and vLLM refuse "
        "(save the file as UTF-8 without BOM)",
    ),
    (
        "loop-weights",
        "vllm-eagle3",
        _loop("model.safetensors"),
        f"{D}: symbolic link loop (point the link at a real file)",
    ),
    (
        "loop-config",
        "vllm-eagle3",
        _loop("config.json"),
        "{d}/config.json: symbolic link loop (point the link at a real file)",
    ),
    (
        "loop-index",
        "vllm-eagle3-sharded",
        _loop("model.safetensors.index.json"),
        "{d}/model.safetensors.index.json: symbolic link loop (point the link at a real file)",
    ),
    (
        "surrogate-name",
        "vllm-eagle3",
        _surrogate_name,
        f"{D}: corrupt safetensors header: a string holds a lone UTF-16 surrogate (not valid Unicode) {REFETCH}",
    ),
    (
        "sparse-4gib-config",
        "vllm-eagle3",
        _sparse("config.json", 4 << 30),
        "{d}/config.json: 4294967296 bytes, more than the 8 MiB a config may have (this is not a real one; replace "
        "it with the original file)",
    ),
    (
        "sparse-1gib-index",
        "vllm-eagle3-sharded",
        _sparse("model.safetensors.index.json", 1 << 30),
        "{d}/model.safetensors.index.json: 1073741824 bytes, more than the 32 MiB a shard index may have (this is "
        "not a real one; replace it with the original file)",
    ),
]


def _run(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(main, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    return result.exit_code, result.stderr


def _args(command: str, folder: Path, base: Path, out: Path) -> list[str]:
    if command == "upgrade":
        return ["upgrade", str(folder), "--out", str(out)]
    if command == "diff":
        return ["diff", str(base), str(folder)]
    return [command, str(folder)]


@pytest.mark.parametrize(("case", "fixture", "craft", "message"), CASES, ids=[c[0] for c in CASES])
def test_crafted_input_is_one_error_line(
    case: str, fixture: str, craft: Callable[[Path], None], message: str, bases, tmp_path: Path
) -> None:
    folder = tmp_path / case
    shutil.copytree(bases(fixture), folder)
    craft(folder)
    before = snapshot(folder)
    for command in COMMANDS:
        out = tmp_path / f"out-{command}"
        code, err = _run(_args(command, folder, bases(fixture), out))
        assert (code, err) == (1, "Error: " + message.format(d=folder) + "\n"), command
        assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == [case]
    assert snapshot(folder) == before


def _fifo(name: str) -> Callable[[Path], None]:
    def craft(d: Path) -> None:
        (d / name).unlink()
        os.mkfifo(d / name)

    return craft


@pytest.mark.parametrize(
    ("fixture", "name"), [("vllm-eagle3", "config.json"), ("vllm-eagle3-sharded", "model.safetensors.index.json")]
)
def test_a_fifo_is_refused_at_once_not_waited_on(fixture: str, name: str, bases, tmp_path: Path) -> None:
    """A real process (a hang would block CliRunner forever): exit 1 in well under the timeout."""
    folder = tmp_path / "d"
    shutil.copytree(bases(fixture), folder)
    _fifo(name)(folder)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    for command in COMMANDS:
        args = _args(command, folder, bases(fixture), tmp_path / "out")
        proc = subprocess.run(
            [sys.executable, "-m", "eagle_convert.cli.app", *args], capture_output=True, text=True, timeout=120, env=env
        )
        assert (proc.returncode, proc.stderr) == (
            1,
            f"Error: {folder / name}: is a FIFO (named pipe), expected a regular file (replace it with the real file)\n",
        ), command
    assert not (tmp_path / "out").exists()


def _bin_with_pickle(folder: Path, pickle_bytes: bytes, *, compress: bool = False, pad: int = 0) -> None:
    path = folder / "pytorch_model.bin"
    with zipfile.ZipFile(path) as zin:
        records = [(info, zin.read(info)) for info in zin.infolist()]
    with zipfile.ZipFile(path, "w") as zout:
        for info, data in records:
            if info.filename.endswith("/data.pkl"):
                kind = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
                zout.writestr(info.filename, pickle_bytes + b"\0" * pad, compress_type=kind)
            else:
                zout.writestr(info, data)


BIN = "{d}/pytorch_model.bin"
UNBOUNDED = "refuses a pickle that would take unbounded memory"
RESAVE = "(re-save the state dict with torch.save or convert it to safetensors)"


@pytest.mark.parametrize(
    ("case", "pickle_bytes", "compress", "pad", "message"),
    [
        (
            "bytes-claim-2^40",
            b"\x80\x04\x8e" + struct.pack("<Q", 1 << 40) + b"x" * 16,
            False,
            0,
            f"{BIN}: cannot read PyTorch checkpoint (expected 1099511627776 bytes in a bytes8, but only 16 remain) "
            "(re-download or re-export the file)",
        ),
        (
            "memo-bomb",
            b"\x80\x02]r\xff\xff\xff\x07.",  # 12 bytes asking for a 2^27-slot memo (1 GB)
            False,
            0,
            f"{BIN}: {UNBOUNDED} (memo slot 134217727 out of order (next is 0)) {RESAVE}",
        ),
        (
            "persistent-id-200k-deep",
            b"\x80\x02)" + b"\x85" * 200_000 + b"Q.",
            False,
            0,
            f"{BIN}: {UNBOUNDED} (objects nested deeper than 100 levels) {RESAVE}",
        ),
        (
            "inflates-to-1-gib",
            b"\x80\x02}.",
            True,
            1 << 30,
            f"{BIN}: {UNBOUNDED} (record pytorch_model/data.pkl inflates to 1073741828 bytes, more than 16777216) "
            f"{RESAVE}",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) and not v.startswith("{") else "",
)
def test_bin_pickle_bombs_are_refused_before_unpickling(
    case: str, pickle_bytes: bytes, compress: bool, pad: int, message: str, bases, tmp_path: Path
) -> None:
    folder = tmp_path / case
    shutil.copytree(bases("vllm-eagle3-fp16-bin"), folder)
    _bin_with_pickle(folder, pickle_bytes, compress=compress, pad=pad)
    before = snapshot(folder)
    for command in COMMANDS:
        code, err = _run(_args(command, folder, bases("vllm-eagle3-fp16-bin"), tmp_path / "out"))
        assert (code, err) == (1, "Error: " + message.format(d=folder) + "\n"), command
    assert not (tmp_path / "out").exists()
    assert snapshot(folder) == before


def test_escape_sequences_in_names_reach_the_terminal_escaped(bases, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    folder = tmp_path / "d"
    shutil.copytree(bases("vllm-eagle3"), folder)
    evil = "\x1b]0;owned\x07\x1b[32mOK\u202e"
    edit_header(folder, lambda h: h.__setitem__(evil + "d2t", h.pop("d2t")))
    for args in (["validate", str(folder)], ["diff", "--headers-only", str(bases("vllm-eagle3")), str(folder)]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code in (0, 1), result.output
        assert "\x1b" not in result.output and "\u202e" not in result.output and "\x07" not in result.output
        assert "\\x1b]0;owned" in result.output and "\\u202e" in result.output
    result = CliRunner().invoke(main, ["upgrade", str(folder), "--out", str(tmp_path / "out")])
    assert result.exit_code == 1 and result.stderr.count("\n") == 1 and "\x1b" not in result.stderr


def test_200k_zero_size_tensors_are_linear(bases, tmp_path: Path) -> None:
    """The table shows 20 rows per finding code; everything else is counted (was minutes in rich)."""
    folder = tmp_path / "d"
    shutil.copytree(bases("vllm-eagle3"), folder)
    hdr, data = header(folder)
    for i in range(200_000):
        hdr[f"z.{i}"] = {"dtype": "F32", "shape": [0], "data_offsets": [len(data), len(data)]}
    put_header(folder, json.dumps(hdr).encode(), data)
    result = CliRunner().invoke(main, ["validate", str(folder)])
    assert result.exit_code == 1
    assert "... and 199,980 more E102 (--json lists all)" in result.output
    assert result.output.count("E102 unknown-tensor") == 20
    assert re.search(r"FAILED: 200000 error\(s\), \d warning\(s\), 0 info\n$", result.output)


@pytest.mark.parametrize(("value", "shown"), [({"a": 1}, '{"a": 1}'), (5, "5"), ([1], "1")])
def test_architectures_of_the_wrong_type(value: object, shown: str, bases, tmp_path: Path) -> None:
    """inspect and upgrade refuse in one line, validate reports it as a finding (was a KeyError in upgrade)."""
    folder = tmp_path / "d"
    shutil.copytree(bases("vllm-eagle3"), folder)
    _config_field("architectures", value)(folder)
    before = snapshot(folder)
    field = "architectures" if not isinstance(value, list) else "architectures[0]"
    want = "a list" if not isinstance(value, list) else "a string"
    line = f"Error: {folder}/config.json: field {field!r} must be {want}, got {shown} (fix the field in config.json)\n"
    assert _run(["inspect", str(folder)]) == (1, line)
    assert _run(["upgrade", str(folder), "--out", str(tmp_path / "out")]) == (1, line)
    result = CliRunner().invoke(main, ["validate", "--json", str(folder)])
    assert result.exit_code == 1
    [hit] = json.loads(result.stdout)["findings"]
    assert hit["code"] == "E304" and hit["message"] == line[len("Error: ") : -1].removesuffix(
        " (fix the field in config.json)"
    )
    assert CliRunner().invoke(main, ["diff", str(bases("vllm-eagle3")), str(folder)]).exit_code == 0
    assert not (tmp_path / "out").exists() and snapshot(folder) == before


def _d2t_claiming(folder: Path, entries: int) -> None:
    """Move d2t to the end of the file and make it claim `entries` int64 entries (sparse bytes)."""
    hdr, data = header(folder)
    d2t = hdr.pop("d2t")
    begin, end = d2t["data_offsets"]
    kept = sorted((k for k in hdr if k != "__metadata__"), key=lambda k: hdr[k]["data_offsets"][0])
    chunks, offset = [], 0
    for k in kept:
        b, e = hdr[k]["data_offsets"]
        chunks.append(data[b:e])
        hdr[k]["data_offsets"] = [offset, offset + e - b]
        offset += e - b
    hdr["d2t"] = {"dtype": "I64", "shape": [entries], "data_offsets": [offset, offset + 8 * entries]}
    put_header(folder, json.dumps(hdr).encode(), b"".join(chunks))
    with open(folder / "model.safetensors", "r+b") as fh:
        fh.truncate(fh.seek(0, 2) + 8 * entries)
    assert begin < end


def test_a_huge_d2t_claim_is_reported_not_read(bases, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sparse 8 GiB d2t: inspect describes it without values, validate reports the shape; no read
    of more than a few KB happens (it used to read the whole claim, or fail with MemoryError)."""
    import eagle_convert.io.tensordata as tensordata

    folder = tmp_path / "d"
    shutil.copytree(bases("vllm-eagle3"), folder)
    _d2t_claiming(folder, 1 << 30)
    real = tensordata.tensor_bytes

    def small_reads_only(source, info, start=0, length=None):  # type: ignore[no-untyped-def]
        assert (info.nbytes - start if length is None else length) < 1 << 20, f"read {info.name} whole"
        return real(source, info, start, length)

    monkeypatch.setattr(tensordata, "tensor_bytes", small_reads_only)
    result = CliRunner().invoke(main, ["inspect", "--json", str(folder)])
    assert result.exit_code == 0, result.output
    d2t = json.loads(result.stdout)["vocab"]["d2t"]
    assert d2t == {"shape": [1 << 30], "dtype": "I64"}
    result = CliRunner().invoke(main, ["validate", "--json", str(folder)])
    assert result.exit_code == 1
    assert any(f["tensor"] == "d2t" and f["code"] == "E201" for f in json.loads(result.stdout)["findings"])


def test_bin_tensor_name_with_a_lone_surrogate(bases, tmp_path: Path) -> None:
    import torch

    folder = tmp_path / "d"
    folder.mkdir()
    shutil.copy(bases("vllm-eagle3-fp16-bin") / "config.json", folder)
    torch.save({"fc.weight\ud800": torch.zeros(2)}, folder / "pytorch_model.bin")
    before = snapshot(folder)
    line = (
        f"Error: {folder}/pytorch_model.bin: cannot read PyTorch checkpoint (tensor name 'fc.weight\\ud800' is "
        "not valid Unicode (a lone surrogate)) (re-save it with torch.save({k: v.contiguous() ...}) or convert it "
        "to safetensors)\n"
    )
    for command in COMMANDS:
        assert _run(_args(command, folder, bases("vllm-eagle3-fp16-bin"), tmp_path / "out")) == (1, line), command
    assert snapshot(folder) == before and not (tmp_path / "out").exists()


def test_config_string_with_a_lone_surrogate(bases, tmp_path: Path) -> None:
    folder = tmp_path / "d"
    shutil.copytree(bases("vllm-eagle3"), folder)
    raw = (folder / "config.json").read_bytes().replace(b'"architectures": [', b'"architectures": ["\\udc80", ', 1)
    assert b"udc80" in raw
    (folder / "config.json").write_bytes(raw)
    line = (
        f"Error: {folder}/config.json: a string holds a lone UTF-16 surrogate (not valid Unicode) "
        "(fix or regenerate the file)\n"
    )
    for command in COMMANDS:
        assert _run(_args(command, folder, bases("vllm-eagle3"), tmp_path / "out")) == (1, line), command
