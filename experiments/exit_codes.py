"""The exit statuses of run.py, the matrix (experiments/matrix.py) and the capacity sweep
(benchmarks/capacity.py), in one place, and how the outcomes of several cells combine.

  0 OK             every solver finished
  1 SOLVERS_FAILED the cells ran, and some solver failed (recorded as failed, its log named)
  2 REFUSED        refused or bad input (a flag, a missing privilege or artifact, a damaged records file)
  3 STALLED        training stalled (no log line, no CPU) or a step timed out
  4 INTERNAL       an internal error: one line on stderr names the log holding its traceback;
                   a record that could not be written is one too
  130 INTERRUPTED  Ctrl-C or SIGTERM

Across cells the worst outcome wins, in the order 130 > 4 > 2 > 3 > 1 > 0: the user's stop
first, then a fault of this tool, then what the user must change, then what the machine did,
then what a solver did. Whoever combines them also says every lesser outcome (failed solvers
before an error), so none is hidden by the one returned.
"""
import sys
import tempfile
import time
import traceback
from pathlib import Path

OK, SOLVERS_FAILED, REFUSED, STALLED, INTERNAL, INTERRUPTED = 0, 1, 2, 3, 4, 130

# least to most severe; a status not listed (another program's) ranks as INTERNAL
SEVERITY = (OK, SOLVERS_FAILED, STALLED, REFUSED, INTERNAL, INTERRUPTED)

MEANING = {OK: "every solver finished", SOLVERS_FAILED: "some solver failed", REFUSED: "refused or bad input",
           STALLED: "stalled or timed out", INTERNAL: "an internal error", INTERRUPTED: "interrupted"}


def _rank(code):
    return SEVERITY.index(code) if code in SEVERITY else SEVERITY.index(INTERNAL)


def worst(*codes):
    """The most severe of the outcomes (OK for none)."""
    return max(codes, key=_rank, default=OK)


def internal_error(error, folder, log=None):
    """Writes `error`'s traceback to FOLDER/internal-error-<time>.log (a temporary folder when FOLDER
    cannot be written), says so on one line (to `log`, stderr by default) and returns INTERNAL."""
    log = log or (lambda m: print(m, file=sys.stderr))
    text = "".join(traceback.format_exception(error))
    name = f"internal-error-{time.strftime('%Y%m%d-%H%M%S')}-{id(error) % 10000:04d}.log"
    path = None
    for where in (folder, tempfile.gettempdir()):
        try:
            Path(where).mkdir(parents=True, exist_ok=True)
            path = Path(where) / name
            path.write_text(text)
            break
        except OSError:
            path = None
    where_text = f"its traceback is in {path}" if path else "its traceback could not be written anywhere"
    log(f"internal error: {type(error).__name__}: {str(error)[:300]} ({where_text}; please report it)")
    return INTERNAL
