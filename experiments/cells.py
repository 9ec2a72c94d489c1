"""A matrix's cells: its runs by (dataset, backend, the state the cache had), their wall
seconds summed up (the matrix's table, the report's figures)."""
import statistics


def cell_stats(records):
    """(dataset, backend, cache) -> mean, sd (None for one run), n of wall seconds over ok runs,
    and the means of start-up seconds and AU where recorded."""
    cells = {}
    for r in records:
        if r.ok:  # by the state the cache had (record.cache_state): a partly warm run is not a warm one
            cells.setdefault((r.dataset, r.backend, r.cache_state), []).append(r)

    def mean_of(rs, attr):
        vals = [getattr(r, attr) for r in rs if getattr(r, attr) is not None]
        return statistics.mean(vals) if vals else None
    return {k: {"mean": statistics.mean(r.wall_seconds for r in v),
                "sd": statistics.stdev(r.wall_seconds for r in v) if len(v) > 1 else None, "n": len(v),
                "startup": mean_of(v, "startup_seconds"), "au": mean_of(v, "au")}
            for k, v in cells.items()}
