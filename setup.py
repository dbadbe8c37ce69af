"""setuptools driving CMake for `pip install --no-build-isolation .` (pyproject.toml).

The build runs CMake (Ninja when present, ccache when present) in build/pip/cmake with the
interpreter pip runs under (Python3_EXECUTABLE), builds the CLI binary and the module (and the
GPU back-end where nvcc is found; PPSIM_CUDA=ON|OFF|AUTO in the environment decides), and copies
them into the package: ppsim/_ppsim*.so, ppsim/ppsim (the binary), ppsim/libppsim_gpu.so. Tests
and benchmarks are not built. PPSIM_CMAKE_ARGS adds CMake arguments; PPSIM_BUILD_JOBS the jobs.
PPSIM_BUILD_DIR names an already built build directory to take the files from instead (its
module must be for this interpreter's version), as tools/test.sh does with its build-test.
"""
import os
import pathlib
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent
(ROOT / "build" / "pip").mkdir(parents=True, exist_ok=True)  # egg_info's base must exist


def _version():
    text = (ROOT / "CMakeLists.txt").read_text()
    return re.search(r"project\(ppsim VERSION ([0-9.]+)", text).group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        if os.environ.get("PPSIM_BUILD_DIR"):
            build = pathlib.Path(os.environ["PPSIM_BUILD_DIR"]).resolve()
        else:
            build = ROOT / "build" / "pip" / "cmake"
            self._configure(build)
            self._build(build, ["--target", "ppsim", "ppsim_python"])
        self._copy(build, ext)

    def _build(self, build, targets):
        jobs = os.environ.get("PPSIM_BUILD_JOBS", str(os.cpu_count() or 2))
        subprocess.run(["cmake", "--build", str(build), *targets, "-j", jobs], check=True)

    def _configure(self, build):
        build.mkdir(parents=True, exist_ok=True)
        args = [
            "-S", str(ROOT), "-B", str(build),
            "-DCMAKE_BUILD_TYPE=Release",
            f"-DPython3_EXECUTABLE={sys.executable}",
            "-DPPSIM_PYTHON=ON",
            "-DPPSIM_BUILD_TESTS=OFF",
            "-DPPSIM_BUILD_BENCH=OFF",
            f"-DPPSIM_CUDA={os.environ.get('PPSIM_CUDA', 'AUTO')}",
        ]
        if shutil.which("ninja"):
            args += ["-G", "Ninja"]
        if shutil.which("ccache"):
            args += ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache", "-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache"]
        args += os.environ.get("PPSIM_CMAKE_ARGS", "").split()
        subprocess.run(["cmake", *args], check=True)

    def _copy(self, build, ext):
        # The module where setuptools expects the extension, the binary and back-end beside it.
        module = next((build / "python" / "ppsim").glob("_ppsim*.so"))
        dest = pathlib.Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(module, dest)
        shutil.copy2(build / "ppsim", dest.parent / "ppsim")
        gpu = build / "libppsim_gpu.so"
        if gpu.exists():
            shutil.copy2(gpu, dest.parent / "libppsim_gpu.so")


setup(
    version=_version(),
    ext_modules=[Extension("ppsim._ppsim", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": "build/pip"}, "egg_info": {"egg_base": "build/pip"}},
)
