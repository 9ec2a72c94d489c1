"""The peers benchmark's tables (benchmarks/peers.py measures): each loader's rows by cache state,
medians and ranges of images/s and images per CPU second, the cells left out counted beside them."""
import statistics


def row_label(loader, form, threads):
    if loader == "caffe" and form == "lmdb":
        return "caffe lmdb (1 prefetch thread)" if threads == 1 else f"caffe lmdb ({threads} transform threads)"
    if loader == "caffe" and form == "lmdb-coalesced":
        return "caffe lmdb coalesced (+1 read-ahead thread)"
    unit = "worker" if loader == "torch" else "thread"
    return f"{loader} {form} ({threads} {unit}{'' if threads == 1 else 's'})"


def median_range(values):
    values = sorted(v for v in values if v)
    if not values:
        return None, "failed"
    med = statistics.median(values)
    return med, f"{med:9,.0f} ({values[0]:,.0f}-{values[-1]:,.0f})" if len(values) > 1 else f"{med:9,.0f}"


def left_out(cell):
    """A cell out of the tables: it failed or missed its cache state (error), or a later run
    found it wrong (superseded, in a record kept)."""
    return "error" in cell or "superseded" in cell


def summarise(cells, dataset, plan, caches):
    """Medians by (row, cache) and the markdown table of one dataset."""
    mine_all = [c for c in cells if c["dataset"] == dataset.name]
    ok = [c for c in mine_all if not left_out(c)]
    table = {}
    lines = ["| loader, form (parallelism) | " + " | ".join(f"{c} images/s | {c} images per CPU-s" for c in caches) + " |",
             "|---|" + "---|---|" * len(caches)]
    for row in plan:
        text = f"| {row_label(*row)} |"
        for state in caches:
            mine = [c for c in ok if (c["loader"], c["form"], c["threads"], c["cache"]) == (*row, state)]
            rate, rate_text = median_range([c["images"] / c["seconds"] for c in mine])
            per_cpu, cpu_text = median_range([c["images"] / c["cpu_seconds"] for c in mine if c["cpu_seconds"]])
            table[(row, state)] = {"images_per_s": rate, "images_per_cpu_s": per_cpu, "n": len(mine)}
            out = sum(1 for c in mine_all if left_out(c) and (c["loader"], c["form"], c["threads"], c["cache"]) ==
                      (*row, state))
            note = f" ({out} left out)" if out else ""
            if out and not mine:
                rate_text = cpu_text = f"left out ({out})"
                note = ""
            text += f" {rate_text.strip()}{note} | {cpu_text.strip()}{note} |"
        lines.append(text)
    return table, lines
