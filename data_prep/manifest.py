"""An artifact's manifest (DATA/DATASET/BACKEND/manifest.json): what it holds, made from what,
and its footprint. Written last, into the artifact's temporary folder before the rename, so a
folder with a manifest is complete. from_dict is the one place that reads old manifests."""
import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

FILE = "manifest.json"


@dataclass(frozen=True)
class Split:
    count: int
    shape: tuple          # C x H x W as stored
    footprint: dict       # apparent_bytes, allocated_bytes, files (a server adds records)


@dataclass(frozen=True)
class Manifest:
    dataset: str
    backend: str
    caffe_layer: str
    source: str                # what it was made from, in words
    source_fingerprint: str    # the source's hash: an artifact from another source is rebuilt
    pretransformed: bool
    transform: dict            # scale, mean_file: what the stored values already include, if pretransformed
    channel_order: str
    seconds: float             # to write it
    created: str
    splits: dict = field(default_factory=dict)  # phase -> Split
    footprint: dict = None     # both splits together

    @classmethod
    def from_dict(cls, d):
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in d.items() if k in known}
        values["splits"] = {phase: Split(s["count"], tuple(s["shape"]), s["footprint"])
                            for phase, s in d.get("splits", {}).items()}
        return cls(**values)

    def to_dict(self):
        d = asdict(self)
        for s in d["splits"].values():
            s["shape"] = list(s["shape"])
        return d

    def write(self, folder):
        (Path(folder) / FILE).write_text(json.dumps(self.to_dict(), indent=1))


def load(folder):
    """The manifest of the artifact in `folder`, or None where there is no complete artifact."""
    path = Path(folder) / FILE
    return Manifest.from_dict(json.loads(path.read_text())) if path.exists() else None
