#!/usr/bin/env python3
"""The medians and ratios the bench scripts print, computed by commbench
itself (`commbench estimate`, crates/core/src/estimate): this file holds
no statistics, only the call and the formatting, so the repository has
one implementation of them.

The binary: $COMMBENCH_BIN, else $CB, else target/release/commbench (or
target/debug) of this checkout, else `commbench` on PATH.

    from cbestimate import median_ci, ratio_ci, paired_ratio_ci, fmt_median, fmt_ratio
"""
import json
import math
import os
import subprocess

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _bin():
    for b in (os.environ.get("COMMBENCH_BIN"), os.environ.get("CB"),
              os.path.join(_ROOT, "target/release/commbench"),
              os.path.join(_ROOT, "target/debug/commbench")):
        if b and os.access(b, os.X_OK):
            return b
    return "commbench"


def _nums(xs):
    return " ".join(repr(float(x)) for x in xs
                    if isinstance(x, (int, float)) and math.isfinite(x))


class Est(tuple):
    """(estimate, lo, hi), with `text`: the line commbench prints for it."""
    text = ""


def _estimate(*args):
    out = subprocess.run([_bin(), "--no-store", "estimate", "--json", *args],
                         capture_output=True, text=True, check=True).stdout
    v = json.loads(out)
    est = v["estimate"] if v["estimate"] is not None else math.nan
    r = Est((est, v["lo"], v["hi"]))
    r.text = v.get("text", "")
    return r


def median_ci(xs):
    """(median, lo, hi): lo and hi None where no interval exists."""
    s = _nums(xs)
    return _estimate("median", s) if s else (math.nan, None, None)


def ratio_ci(before, after):
    """(after / before, lo, hi) of unpaired repeats."""
    b, a = _nums(before), _nums(after)
    return _estimate("ratio", "--before", b, "--after", a) if a and b else (math.nan, None, None)


def paired_ratio_ci(pairs):
    """(after / before, lo, hi) over pairs (before, after) run side by side."""
    ok = [(b, a) for b, a in pairs if all(isinstance(x, (int, float)) and math.isfinite(x) for x in (b, a))]
    if not ok:
        return (math.nan, None, None)
    return _estimate("paired", "--before", _nums(b for b, _ in ok), "--after", _nums(a for _, a in ok))


def fmt_ratio(r):
    """The ratio as commbench prints every ratio (one precision for the
    ratio and its interval), or why there is none."""
    if getattr(r, "text", ""):
        return r.text
    return "not measured: no samples on a side"


def fmt_median(m, digits=3):
    med, lo, hi = m
    if lo is None or hi is None:
        return f"{med:.{digits}f} [n<6: no interval]"
    return f"{med:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"
