"""Time to a target validation accuracy on a job's clock, for bench/cluster_report.py and
bench/cluster_ab.sh: the crossing interpolated linearly between the last validation below the
target and the first at or above it. Before the first step a model guesses (chance accuracy),
so the first epoch's crossing is interpolated from the start-up's end at chance. Beside it, the
first validation at or above the target: when a user watching the run sees it."""


def time_to_target(points, target, start_seconds, chance):
    """points: (seconds, val_accuracy) in order; the seconds at `target`, or inf if never."""
    before = (start_seconds, chance)
    for seconds, accuracy in points:
        if accuracy >= target:
            t0, a0 = before
            return t0 + (seconds - t0) * (target - a0) / (accuracy - a0) if accuracy > a0 else seconds
        before = (seconds, accuracy)
    return float("inf")


def first_at_target(points, target):
    """points: (seconds, val_accuracy) in order; the seconds of the first at or above `target`, or inf."""
    return next((seconds for seconds, accuracy in points if accuracy >= target), float("inf"))


if __name__ == "__main__":  # a check of the interpolation: python3 bench/time_to_target.py
    close = lambda a, b: abs(a - b) < 1e-9
    assert close(time_to_target([(10, 0.7), (20, 0.9)], 0.8, 1, 0.1), 15)
    assert close(time_to_target([(10, 0.9)], 0.5, 2, 0.1), 6)
    assert time_to_target([(10, 0.7)], 0.8, 0, 0.1) == float("inf")
    assert first_at_target([(10, 0.7), (20, 0.9), (30, 0.95)], 0.8) == 20
    assert first_at_target([(10, 0.7)], 0.8) == float("inf")
    print("ok")
