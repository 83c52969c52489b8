import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("CACTUS_LIBRARY", str(Path(os.environ.get("CACTUS_BUILD_DIR", ROOT / "build")) / "lib" / "libcactus.so"))


from cactus_test_paths import model_path  # noqa: E402  (after the sys.path lines above)


@pytest.fixture(scope="session")
def smollm():
    import cactus
    handle = cactus.cactus_init(model_path("smollm2-135m"))
    yield handle
    cactus.cactus_destroy(handle)


@pytest.fixture(scope="session")
def gemma():
    import cactus
    handle = cactus.cactus_init(model_path("gemma3-270m"))
    yield handle
    cactus.cactus_destroy(handle)
