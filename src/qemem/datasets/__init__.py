"""Public datasets qemem evaluates on: fetching LoCoMo (:mod:`qemem.datasets.locomo`) and
converting local copies of BEAM (:mod:`qemem.datasets.beam`) and LongMemEval into the
LoCoMo-shaped JSON the evaluation commands read."""

from qemem.datasets.locomo import (
    LOCOMO_FILE,
    LOCOMO_SHA256,
    LOCOMO_URL,
    download_locomo,
    locomo_subset,
)

__all__ = ["LOCOMO_FILE", "LOCOMO_SHA256", "LOCOMO_URL", "download_locomo", "locomo_subset"]
