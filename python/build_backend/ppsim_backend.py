"""PEP 517 build backend for ppsim, kept in the tree (pyproject.toml: backend-path), so that
`pip install .` needs nothing from a package index: only the standard library, CMake and a C++
compiler (tools/install-deps.sh).

build_wheel builds two CMake targets, the module (ppsim_python) and the CLI binary (ppsim), and
writes the wheel with zipfile: the pure-Python package python/ppsim, the module renamed to this
interpreter's extension suffix, the binary beside it (the `ppsim` console script runs it), the GPU
back-end libppsim_gpu.so where nvcc was found (opened only by a GPU call), the MPI launcher
libppsim_mpi.so where MPI was found (opened only under mpirun/srun: the binary and the module link
no MPI), and configs/published and configs/heldout (what `ppsim fidelity` compares with). fmt,
yaml-cpp and toml++ are compiled in (CMake's
PPSIM_BUNDLE_DEPS; yaml-cpp into the module from the position-independent archive that
tools/build_yaml_pic.sh builds, else the wheel carries libyaml-cpp.so beside the module); the
module links no MPI.

Where the build happens:
- PPSIM_BUILD_DIR=dir: that build directory's files, built already (tools/test.sh's build-test);
- else the quickstart's tree build/ when it suits this interpreter (configured by this checkout,
  with the module, for this Python's major.minor, self-contained): only the two targets are
  brought up to date there;
- else build-pip/py<XY>, configured here (tests and benchmarks off; ccache and Ninja when found).
PPSIM_CUDA=AUTO|ON|OFF decides the back-end of a new tree, PPSIM_CMAKE_ARGS adds CMake arguments,
PPSIM_BUILD_JOBS the jobs (default: the cores). pip shows a backend's output only with -v: the
build's progress goes to the terminal (/dev/tty) as well, unless PPSIM_BUILD_QUIET=1.
"""
import base64
import hashlib
import io
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
NAME = "ppsim"
SUMMARY = "Simulator and planner for pipeline-parallel training schedules"


def _version():
    text = (ROOT / "CMakeLists.txt").read_text()
    return re.search(r"project\(ppsim VERSION ([0-9.]+)", text).group(1)


# ---- progress ------------------------------------------------------------------------------
class _Progress:
    """Lines to stderr (pip -v shows them) and, on a terminal, to /dev/tty (pip hides stderr)."""

    def __init__(self):
        self.tty = None
        if os.environ.get("PPSIM_BUILD_QUIET") != "1" and not sys.stderr.isatty():
            try:
                self.tty = open("/dev/tty", "w")
            except OSError:
                self.tty = None

    def say(self, line):
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
        if self.tty:
            self.tty.write(line[:150] + "\n")
            self.tty.flush()

    def run(self, cmd):
        self.say("ppsim build: " + " ".join(str(c) for c in cmd))
        proc = subprocess.Popen([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, errors="replace")
        tail = []
        for line in proc.stdout:
            line = line.rstrip("\n")
            tail = (tail + [line])[-40:]
            self.say("  " + line)
        if proc.wait() != 0:
            raise RuntimeError(f"ppsim build: {cmd[0]} failed (exit {proc.returncode}); last lines:\n"
                               + "\n".join(tail))


# ---- the CMake build -----------------------------------------------------------------------
def _cache(build):
    path = build / "CMakeCache.txt"
    if not path.is_file():
        return {}
    out = {}
    for line in path.read_text(errors="replace").splitlines():
        m = re.match(r"([A-Za-z0-9_]+):[A-Z]+=(.*)", line)
        if m:
            out[m.group(1)] = m.group(2)
    return out


def _python_of(build):
    """(major, minor) of the interpreter a build tree's module is for, or None."""
    txt = build / "python" / "python_executable.txt"
    if not txt.is_file():
        return None
    exe = txt.read_text().strip()
    try:
        out = subprocess.run([exe, "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True,
                             text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return None
    return tuple(int(x) for x in out)


def _suits(build):
    """Why the tree `build` cannot make this interpreter's wheel, or '' when it can."""
    cache = _cache(build)
    if not cache:
        return "not configured"
    if pathlib.Path(cache.get("CMAKE_HOME_DIRECTORY", "")).resolve() != ROOT:
        return "configured for another source tree"
    if cache.get("PPSIM_BUNDLE_DEPS", "ON") == "OFF" or cache.get("PPSIM_PYTHON") == "OFF":
        return "configured without the self-contained module (PPSIM_BUNDLE_DEPS, PPSIM_PYTHON)"
    if cache.get("PPSIM_SANITIZE") == "ON" or cache.get("CMAKE_BUILD_TYPE") != "Release":
        return "not a plain Release build"
    py = _python_of(build)
    if py != tuple(sys.version_info[:2]):
        return f"its module is for Python {py}, this is {sys.version_info[0]}.{sys.version_info[1]}"
    return ""


def _configure(build, progress):
    args = ["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release", f"-DPython3_EXECUTABLE={sys.executable}",
            "-DPPSIM_PYTHON=ON", "-DPPSIM_BUNDLE_DEPS=ON", "-DPPSIM_BUILD_TESTS=OFF", "-DPPSIM_BUILD_BENCH=OFF",
            f"-DPPSIM_CUDA={os.environ.get('PPSIM_CUDA', 'AUTO')}"]
    if shutil.which("ninja") and not (build / "CMakeCache.txt").exists():
        args += ["-G", "Ninja"]
    if shutil.which("ccache"):
        args += ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache", "-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache"]
    args += os.environ.get("PPSIM_CMAKE_ARGS", "").split()
    progress.run(args)


def _build_tree():
    """The build directory holding this interpreter's module and the binary, brought up to date."""
    if os.environ.get("PPSIM_BUILD_DIR"):
        build = pathlib.Path(os.environ["PPSIM_BUILD_DIR"]).resolve()
        py = _python_of(build)
        if py and py != tuple(sys.version_info[:2]):
            raise RuntimeError(f"PPSIM_BUILD_DIR={build}: its module is for Python {py[0]}.{py[1]}, "
                               f"this is {sys.version_info[0]}.{sys.version_info[1]}")
        return build
    progress = _Progress()
    quick = ROOT / "build"
    why = _suits(quick)
    if why:
        build = ROOT / "build-pip" / f"py{sys.version_info[0]}{sys.version_info[1]}"
        progress.say(f"ppsim build: not reusing {quick} ({why}); building in {build} (pip -v shows the log)")
        _configure(build, progress)
    else:
        build = quick
        progress.say(f"ppsim build: reusing the quickstart's tree {build} (pip -v shows the log)")
        if (ROOT / ".deps" / "yaml-cpp-pic" / "lib" / "libyaml-cpp.a").is_file() and \
                _cache(build).get("PPSIM_YAML_PIC") != "ON":
            progress.run(["cmake", build])  # configured before tools/build_yaml_pic.sh ran
    jobs = os.environ.get("PPSIM_BUILD_JOBS", str(os.cpu_count() or 2))
    progress.run(["cmake", "--build", build, "--target", "ppsim", "ppsim_python", "-j", jobs])
    return build


# ---- the wheel -----------------------------------------------------------------------------
def _tag():
    impl = f"cp{sys.version_info[0]}{sys.version_info[1]}"
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{impl}-{impl}{getattr(sys, 'abiflags', '')}-{plat}"


def _metadata():
    readme = (ROOT / "README.md").read_text()
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {_version()}\nSummary: {SUMMARY}\n"
            "Requires-Python: >=3.9\nDescription-Content-Type: text/markdown\n\n" + readme)


def _dist_info_files(tag):
    return {
        "METADATA": _metadata(),
        "WHEEL": f"Wheel-Version: 1.0\nGenerator: ppsim_backend\nRoot-Is-Purelib: false\nTag: {tag}\n",
        "entry_points.txt": "[console_scripts]\nppsim = ppsim.__main__:main\n",
        "top_level.txt": "ppsim\n",
    }


def _package_files(build):
    """(path in the wheel, source file) for the package."""
    pkg = ROOT / "python" / "ppsim"
    files = [(f"ppsim/{p.name}", p) for p in sorted(pkg.iterdir()) if p.suffix in (".py", ".pyi", ".typed")]
    module = sorted((build / "python" / "ppsim").glob("_ppsim*.so"))
    if not module:
        raise RuntimeError(f"ppsim build: no module _ppsim*.so in {build / 'python' / 'ppsim'}")
    files.append(("ppsim/_ppsim" + sysconfig.get_config_var("EXT_SUFFIX"), module[0]))
    files += [(f"ppsim/{lib.name}", lib) for lib in _carried_libraries(module[0])]
    files.append(("ppsim/ppsim", build / "ppsim"))
    for plugin in ("libppsim_gpu.so", "libppsim_mpi.so"):  # opened on demand: GPU commands, mpirun/srun
        if (build / plugin).exists():
            files.append((f"ppsim/{plugin}", build / plugin))
    for folder in ("published", "heldout"):  # `ppsim fidelity [--dir configs/heldout]` from any folder
        for p in sorted((ROOT / "configs" / folder).rglob("*")):
            if p.is_file():
                files.append((f"ppsim/configs/{folder}/{p.relative_to(ROOT / 'configs' / folder)}", p))
    return files


def _carried_libraries(module):
    """The shared libraries the module needs that a bare system may lack, found by ldd, for the
    wheel to carry beside the module (its RUNPATH is $ORIGIN): none when yaml-cpp is built in;
    libyaml-cpp.so without tools/build_yaml_pic.sh's archive (Debian's libyaml-cpp.a is
    position-dependent)."""
    try:
        out = subprocess.run(["ldd", str(module)], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return []
    libs = re.findall(r"^\s*(lib(?:yaml-cpp|fmt|tomlplusplus)\.so[.0-9]*) => (\S+)", out, re.M)
    return [pathlib.Path(path) for _, path in libs if pathlib.Path(path).parent != module.parent]


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def _write_wheel(wheel_directory, files, dist_info):
    tag = _tag()
    name = f"{NAME}-{_version()}-{tag}.whl"
    info = f"{NAME}-{_version()}.dist-info"
    path = pathlib.Path(wheel_directory) / name
    record = []
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for arcname, src in files:
            data = src.read_bytes()
            zi = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
            zi.external_attr = ((0o755 if os.access(src, os.X_OK) else 0o644) | 0o100000) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(zi, data)
            record.append(_record_line(arcname, data))
        for fname, text in dist_info.items():
            data = text.encode()
            zf.writestr(f"{info}/{fname}", data)
            record.append(_record_line(f"{info}/{fname}", data))
        record.append(f"{info}/RECORD,,")
        zf.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    return name


# ---- PEP 517 hooks -------------------------------------------------------------------------
def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    info = pathlib.Path(metadata_directory) / f"{NAME}-{_version()}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    for fname, text in _dist_info_files(_tag()).items():
        (info / fname).write_text(text)
    return info.name


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    build = _build_tree()
    return _write_wheel(wheel_directory, _package_files(build), _dist_info_files(_tag()))


def build_sdist(sdist_directory, config_settings=None):
    """The tracked files (git ls-files), or the tree less build directories without git."""
    try:
        names = subprocess.run(["git", "-C", ROOT, "ls-files"], capture_output=True, text=True,
                               check=True).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        names = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file()
                 and not re.match(r"(build[^/]*|\.git)/", str(p.relative_to(ROOT)))]
    base = f"{NAME}-{_version()}"
    name = f"{base}.tar.gz"
    with tarfile.open(pathlib.Path(sdist_directory) / name, "w:gz") as tf:
        for n in filter(None, names):
            if (ROOT / n).is_file():
                tf.add(ROOT / n, arcname=f"{base}/{n}")
        pkg_info = tarfile.TarInfo(f"{base}/PKG-INFO")
        data = _metadata().encode()
        pkg_info.size = len(data)
        tf.addfile(pkg_info, io.BytesIO(data))
    return name
