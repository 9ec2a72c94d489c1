"""The project as a built wheel (pyproject.toml): every package folder of the tree is in it, with
the files its commands read at run time, and `imgstore run --help` and `imgstore redis --help`
run from a venv it is installed in, away from the checkout (the project's .venv's packages
visible through a .pth file, the checkout on no path)."""
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

from conftest import ROOT

LEFT_OUT = ("results/", "caffe/", "docs/", "tests/", "docker/")  # no part of the wheel, and large


def tracked_sources(into):
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True,
                           timeout=60).stdout.split("\0")
    for name in names:
        if name and not name.startswith(LEFT_OUT) and (ROOT / name).is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, into / name)
    return [n for n in names if n]


def project_paths():
    """The lines of a .pth that shows the project's .venv's packages, without its editable install
    of the checkout: its site-packages and the paths its other .pth files add (pycaffe's)."""
    lines = []
    for folder in map(Path, site.getsitepackages()):
        lines.append(str(folder))
        for pth in sorted(folder.glob("*.pth")):
            if not pth.name.startswith("__editable__"):
                lines += [line for line in pth.read_text().splitlines() if line and not line.startswith(("import", "#"))]
    return lines


def test_the_wheel_holds_every_package_and_its_commands_run_from_it(tmp_path):
    source, wheels, venv = tmp_path / "src", tmp_path / "wheels", tmp_path / "venv"
    names = tracked_sources(source)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
                            "-q", "-w", str(wheels)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr[-2000:]
    wheel, = wheels.glob("imgstore-*.whl")
    inside = set(zipfile.ZipFile(wheel).namelist())
    packages = [str(Path(n).parent) for n in names if n.endswith("/__init__.py") and not n.startswith(LEFT_OUT)]
    assert [p for p in packages if f"{p}/__init__.py" not in inside] == [], "package folders the wheel leaves out"
    assert {"models/accelerators.json", "analysis/paper_reference.json", "data_prep/delay_proxy.c",
            "data_prep/apt-packages.txt"} <= inside

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    purelib = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    (Path(purelib) / "project-packages.pth").write_text("\n".join(project_paths()) + "\n")
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
                                "--no-deps", "-q", str(wheel)], capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr[-2000:]

    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}  # no PYTHONPATH, no checkout
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import data_prep, cli; print(data_prep.__file__, cli.__file__)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert where.returncode == 0 and str(ROOT) not in where.stdout and purelib in where.stdout, where
    for command, usage in ((["run", "--help"], "usage: imgstore run"), (["redis", "--help"], "usage: imgstore redis")):
        done = subprocess.run([str(venv / "bin" / "imgstore"), *command], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and usage in done.stdout, (command, done.stderr[-2000:])
