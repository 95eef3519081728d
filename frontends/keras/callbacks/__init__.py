"""Callbacks for fit: FlexFlow's (Callback, LearningRateScheduler, VerifyMetrics,
EpochVerifyMetrics) and the Keras ones users expect (History, ProgbarLogger, EarlyStopping,
ModelCheckpoint)."""

from .base import Callback, CallbackList
from .checkpoint import ModelCheckpoint
from .early_stopping import EarlyStopping
from .history import History
from .progbar_logger import ProgbarLogger
from .schedule import LearningRateScheduler
from .verify import EpochVerifyMetrics, VerifyMetrics

__all__ = ["Callback", "CallbackList", "History", "ProgbarLogger", "LearningRateScheduler",
           "VerifyMetrics", "EpochVerifyMetrics", "EarlyStopping", "ModelCheckpoint"]
