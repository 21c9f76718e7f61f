"""The extension module ddpsim._core, built by the project's CMake (the repository above this
folder) with the scheduler libraries and the simulator (SimGrid), without LibTorch or tests.
DDPSIM_JOBS sets the build's parallelism (default 2)."""

import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build = os.path.abspath(os.path.join(self.build_temp, "cmake"))
        subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                               "-DDDPSIM_BUILD_SIM=ON", "-DDDPSIM_BUILD_TRAINER=OFF", "-DDDPSIM_BUILD_TESTS=OFF",
                               f"-DPython_EXECUTABLE={sys.executable}"])
        subprocess.check_call(["cmake", "--build", build, "--target", "ddpsim_core", "-j",
                               os.environ.get("DDPSIM_JOBS", "2")])
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy(os.path.join(build, "python", "ddpsim", os.path.basename(target)), target)
        # ddpsim.plots draws with the plots/ scripts: they ship inside the package.
        shutil.copytree(os.path.join(ROOT, "plots"), os.path.join(os.path.dirname(target), "_plots"),
                        ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)


setup(ext_modules=[Extension("ddpsim._core", sources=[])], cmdclass={"build_ext": CMakeBuild})
