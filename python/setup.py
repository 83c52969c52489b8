"""Builds (or locates) libcactus and ships it inside the package.

Order: $CACTUS_LIBRARY (a path to libcactus.so), else ../build/lib/libcactus.so from a built
checkout, else a fresh CMake build of the checkout next to this folder.
"""
import os
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def find_or_build_library() -> Path:
    env = os.environ.get("CACTUS_LIBRARY")
    if env:
        return Path(env)
    built = REPO / "build" / "lib" / "libcactus.so"
    if built.exists():
        return built
    if not (REPO / "CMakeLists.txt").exists():
        raise RuntimeError("libcactus not found: set CACTUS_LIBRARY or install from a cactus checkout")
    build_dir = REPO / "build"
    subprocess.check_call(["cmake", "-S", str(REPO), "-B", str(build_dir), "-G", "Ninja",
                           "-DCMAKE_BUILD_TYPE=Release", "-DCACTUS_BUILD_TESTS=OFF"])
    subprocess.check_call(["cmake", "--build", str(build_dir), "--target", "cactus_shared"])
    return built


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        library = find_or_build_library()
        target = Path(self.build_lib) / "cactus" / "lib"
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy2(library.resolve(), target / "libcactus.so")


setup(cmdclass={"build_py": BuildWithLibrary})
