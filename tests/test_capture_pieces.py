"""The pipeline-parallel capture's merge (`vllm/capture_pieces.py`) on synthetic per-rank pieces.

What every rank of a pipeline-parallel engine answers is simulated here from one full capture split
the way vLLM splits the layers (`get_pp_indices`: contiguous slices, rank r holding layers
start_r..end_r-1 and so aux ids start_r+1..end_r, rank 0 also id 0, the last rank the logits); the
merge must give back the one-rank capture exactly, whatever the split and the answer order.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from eagle_convert.vllm.capture_pieces import (  # noqa: E402
    cpu_thread_bind,
    merge_pieces,
    pack_tensor,
    unpack_tensor,
)

N, H, LAYERS, ROWS = 7, 16, 8, 5


def _full(aux_ids: list[int], dtype=torch.bfloat16) -> dict:
    g = torch.Generator().manual_seed(0)
    states = {i: torch.randn(N, H, generator=g).to(dtype) for i in range(LAYERS + 1)}
    logits = torch.randn(N, ROWS, generator=g)
    return {"states": states, "logits": logits, "argmax": logits.argmax(-1)}


def _pieces(full: dict, aux_ids: list[int], bounds: list[tuple[int, int]], tp: int = 1) -> list[dict]:
    """What each (pp rank, tp rank) answers: only tp rank 0 sends states and logits."""
    out = []
    for r, (start, end) in enumerate(bounds):
        own = [i for i in aux_ids if (i == 0 and start == 0) or start < i <= end]
        for t in range(tp):
            piece = {"rank": r, "aux": {}, "logits": None, "argmax": None}
            if t == 0:
                piece["aux"] = {str(i): pack_tensor(full["states"][i]) for i in own}
                if r == len(bounds) - 1:
                    piece["logits"] = pack_tensor(full["logits"])
                    piece["argmax"] = pack_tensor(full["argmax"])
            out.append(piece)
    return out


@pytest.mark.parametrize(
    ("aux_ids", "bounds"),
    [
        ([1, 3, 6], [(0, 4), (4, 8)]),  # the fixture at pp=2: rank 0 holds 1 and 3, rank 1 holds 6
        ([1, 3, 6], [(0, 3), (3, 6), (6, 8)]),  # pp=3, one id per rank
        ([0, 4, 8], [(0, 4), (4, 8)]),  # the embedding, a boundary id (rank 0's last), the final layer
        ([2, 4, 5], [(0, 6), (6, 8)]),  # the last rank holds no aux id, only the logits
        ([1, 3, 6], [(0, 8)]),  # pp=1 through the same path
    ],
)
def test_the_merge_gives_back_the_one_rank_capture(aux_ids, bounds) -> None:
    full = _full(aux_ids)
    want = torch.cat([full["states"][i] for i in aux_ids], dim=-1)
    for order in (1, -1):  # the answers' order does not matter
        got = merge_pieces(_pieces(full, aux_ids, bounds, tp=2)[::order], aux_ids, N)
        assert torch.equal(got["aux"], want) and got["aux"].dtype == torch.bfloat16
        assert torch.equal(got["logits"], full["logits"]) and torch.equal(got["argmax"], full["argmax"])


def test_a_missing_or_doubled_aux_id_is_an_error() -> None:
    full = _full([1, 3, 6])
    pieces = _pieces(full, [1, 3, 6], [(0, 4), (4, 8)])
    del pieces[1]["aux"]["6"]
    with pytest.raises(RuntimeError, match=r"aux ids no rank captured: \[6\]; captured by more than one rank: \{\}"):
        merge_pieces(pieces, [1, 3, 6], N)
    pieces = _pieces(full, [1, 3, 6], [(0, 4), (4, 8)])
    pieces[1]["aux"]["3"] = pieces[0]["aux"]["3"]
    with pytest.raises(RuntimeError, match=r"captured by more than one rank: \{3: \[0, 1\]\}"):
        merge_pieces(pieces, [1, 3, 6], N)


def test_logits_from_no_rank_or_two_and_short_pieces_are_errors() -> None:
    full = _full([1, 3, 6])
    pieces = _pieces(full, [1, 3, 6], [(0, 4), (4, 8)])
    pieces[1]["logits"] = None
    with pytest.raises(RuntimeError, match=r"expected the logits from one rank \(the last\), got them from 0"):
        merge_pieces(pieces, [1, 3, 6], N)
    pieces = _pieces(full, [1, 3, 6], [(0, 4), (4, 8)])
    pieces[0]["logits"], pieces[0]["argmax"] = pieces[1]["logits"], pieces[1]["argmax"]
    with pytest.raises(RuntimeError, match=r"got them from 2"):
        merge_pieces(pieces, [1, 3, 6], N)
    pieces = _pieces(full, [1, 3, 6], [(0, 4), (4, 8)])
    pieces[0]["aux"]["1"] = pack_tensor(full["states"][1][:-1])
    with pytest.raises(RuntimeError, match=r"'aux 1': 6.* for a 7-token prompt"):
        merge_pieces(pieces, [1, 3, 6], N)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32, torch.long])
def test_packed_tensors_survive_msgpack(dtype) -> None:
    msgspec = pytest.importorskip("msgspec")  # what vLLM's engine-core channel encodes with
    t = (torch.arange(12).reshape(3, 4) * 3 - 7).to(dtype)
    wire = msgspec.msgpack.decode(msgspec.msgpack.encode(pack_tensor(t[:, 1:])))  # a non-contiguous view
    back = unpack_tensor(wire)
    assert back.dtype == dtype and torch.equal(back, t[:, 1:])
    assert unpack_tensor(pack_tensor(torch.empty(0, 4, dtype=dtype))).shape == (0, 4)


def test_cpu_thread_bind_splits_the_allowed_cores() -> None:
    assert cpu_thread_bind(2, [1, 0]) == "0|1"
    assert cpu_thread_bind(2, [0, 1, 2, 3, 4]) == "0,1,2|3,4"
    assert cpu_thread_bind(1, [0, 1]) == "0,1"
    with pytest.raises(ValueError, match="4 CPU workers need at least 4 CPUs, 2 allowed"):
        cpu_thread_bind(4, [0, 1])
