"""`benchmarks.timing.rotated_rounds`, which the engine benchmarks' side-by-side ratios come from."""

from __future__ import annotations

from benchmarks.timing import rotated_rounds


def test_rounds_rotate_the_order_and_take_medians_of_per_round_ratios() -> None:
    calls: list[str] = []
    seconds = {"a": iter([1.0, 2.0, 9.0]), "b": iter([4.0, 4.0, 10.0])}

    def run(mode: str) -> tuple[float, object]:
        calls.append(mode)
        return next(seconds[mode]), {"figures": [1, 2]}

    medians, ratio, same, results = rotated_rounds(("a", "b"), 3, run)
    assert calls == ["a", "b", "b", "a", "a", "b"]  # a machine drifting between rounds cancels
    assert medians == {"a": 2.0, "b": 4.0} and ratio == 0.5  # ratios 0.25, 0.5, 0.9
    assert same and results == {"a": {"figures": [1, 2]}, "b": {"figures": [1, 2]}}


def test_a_round_with_different_results_is_reported() -> None:
    answers = iter([(1.0, 1), (1.0, 1), (1.0, 1), (1.0, 2)])
    _, _, same, _ = rotated_rounds(("a", "b"), 2, lambda _mode: next(answers))
    assert not same
