"""Random augmentation repeated by every DataLoader worker (``debug_worker_randomness``, on by default).

With ``torch_dataloader_opts = {"num_workers": N}``, each worker process gets a copy of the
dataset. A random generator that the dataset owns (``self.rng = np.random.default_rng(0)``) is
copied in the state it has in the main process, which the workers never advance: all workers
draw the same noise, crops or masks, and every epoch the same ones again. torch reseeds its own,
Python's and numpy's global generators per worker, but not the dataset's.

At startup, for each dataset loaded in workers, the first batch is read three times from the
same generator states (``framework.datasets.worker_seeding``, every state restored afterwards):
an owned generator that ``get_batch`` draws from and whose state decides the batch is reseeded in
each worker from torch's worker seed, and one line says so. A dataset that seeds per index or
epoch, draws from numpy's global generator, or is deterministic keeps its meaning and is not
touched.
"""

from __future__ import annotations

from framework.base.config import Config
from framework.base.findings import Finding, report
from framework.base.options import register
from framework.core.events import Event, Order
from framework.core.plugin import Plugin, on
from framework.core.state import RunState
from framework.datasets.worker_seeding import repeating_generators

register(
    "debug_worker_randomness",
    "bool",
    True,
    "Startup: reseed in each DataLoader worker the random generators a dataset owns (copied alike into every "
    "worker: the same augmentation in every worker and epoch), and say so.",
    __name__,
)


class WorkerRandomness(Plugin):
    """Finds dataset-owned generators that workers would repeat; has the loaders reseed them per worker."""

    bug_check = ("debug_worker_randomness",)

    order = Order.TRAINING

    def __init__(self, num_workers: int):
        self.num_workers = num_workers

    @classmethod
    def from_config(cls, config: Config, state: RunState) -> WorkerRandomness | None:
        workers = (config.get("torch_dataloader_opts") or {}).get("num_workers", 0)
        return cls(workers) if config.bool("debug_worker_randomness") and workers > 0 else None

    @on(Event.STARTUP)
    def reseed_in_workers(self, state: RunState) -> None:
        for option, loader in state.loaders.items():
            plan = loader.plan(1)
            if not plan:
                continue
            found = repeating_generators(loader.dataset, plan[0][:2])
            if not found:
                continue
            state.control.use_loader(option, loader.reseeding(tuple(found)))
            named = ", ".join(
                f"dataset.{path} ({type(g).__module__.split('.')[0]}.{type(g).__name__})" for path, g in found.items()
            )
            message = (
                f"Dataset {option!r} ({loader.dataset.name}) draws from its own random generator {named} when it "
                f"loads a batch. Each of the {self.num_workers} DataLoader workers (torch_dataloader_opts) gets a copy "
                f"of it in the same state, so every worker would draw the same augmentation, and every epoch the same "
                f"again. The framework reseeds it in each worker from torch's worker seed (different per worker and "
                f"epoch, reproducible with random_seed); a worker_init_fn of yours runs after that."
            )
            # What the framework repairs for the user: one note, shown at the default verbosity.
            report(
                Finding(
                    "note",
                    "worker randomness",
                    message,
                    evidence={"num_workers": self.num_workers},
                    where={"dataset": option, "generators": list(found)},
                    option="debug_worker_randomness = False",
                )
            )


PLUGINS = (WorkerRandomness,)
