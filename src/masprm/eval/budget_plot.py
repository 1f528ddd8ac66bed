"""Stage 5's plot: accuracy (mean ± std over seeds) against model work per example, one curve per method
through its budgets, from the rows of ``masprm.eval.aggregate``. Pure Python (matplotlib is imported only
to draw).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from masprm.eval.aggregate import curve_names
from masprm.io import atomic_open

if TYPE_CHECKING:
    from masprm.eval.aggregate import Row

Point = tuple[float, float, float, str]    # (work, accuracy mean, accuracy std over seeds, budget)


def uses_model_work(rows: Sequence[Row]) -> bool:
    """True when every row with an accuracy has model work for every seed; else the plot uses generated
    tokens for all rows, so that one axis never mixes the two."""
    scored = [r for r in rows if r.mean("pass@1") is not None]
    return bool(scored) and all(r.work_mean() is not None for r in scored)


def plot_series(rows: Sequence[Row]) -> dict[str, list[Point]]:
    """One curve per method: its experiments' points sorted by work (see `uses_model_work`).

    Experiments join a curve when their manifests agree except in the method's
    budget settings; a curve is named by its method, plus what tells it apart
    where two curves share one (``curve_names``, the flags the table's rows are
    named with). Rows without an accuracy or a work value are left out.
    """
    model = uses_model_work(rows)
    curves: dict[str, list[tuple[Row, float]]] = {}
    for row in rows:
        x = row.work_mean() if model else row.mean("tokens")
        if row.mean("pass@1") is not None and x is not None:
            curves.setdefault(row.condition.series, []).append((row, x))
    names = curve_names([row for members in curves.values() for row, _ in members])
    return {names[series]: sorted((x, r.mean("pass@1"), r.std("pass@1"), r.condition.budget) for r, x in members)
            for series, members in curves.items()}


def plot_results(rows: Sequence[Row], out: str | Path) -> bool:
    """Accuracy (mean ± std over seeds) against work, one line per method (`plot_series`); False if
    nothing to draw. The PNG is written to a temporary file and renamed into place."""
    series = plot_series(rows)
    if not series:
        return False
    import matplotlib   # heavy: only when a plot is drawn
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, ax = plt.subplots(figsize=(8, 5.5))
    for name, points in series.items():
        xs, ys, errs, budgets = zip(*points)
        ax.errorbar(xs, ys, yerr=errs, fmt="-o", capsize=3, markersize=4, label=name)
        for x, y, budget in zip(xs, ys, budgets):
            if budget:
                ax.annotate(budget, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    if all(x > 0 for points in series.values() for x, *_ in points):
        ax.set_xscale("log")   # budgets grow geometrically (5, 10, 20 simulations)
        # plain numbers ("60", not "6x10^1"); minor ticks labelled only over a narrow range
        ax.xaxis.set_major_formatter(matplotlib.ticker.LogFormatter())
        ax.xaxis.set_minor_formatter(matplotlib.ticker.LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
    ax.set_xlabel("model work per example: policy tokens generated + scorer tokens read (mean)"
                  if uses_model_work(rows) else "generated tokens per example (mean; summary sidecars missing)")
    ax.set_ylabel("accuracy (pass@1), mean ± std over seeds")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    save_png(fig, out)
    return True


def save_png(fig, out: str | Path) -> None:
    """Write a matplotlib figure as a PNG through a new temporary file renamed into place (a link planted
    at the path is replaced, never written through), and close it."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    try:
        with atomic_open(out, "wb") as fh:
            fig.savefig(fh, dpi=120, format="png")
    finally:
        plt.close(fig)
