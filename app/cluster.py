"""`dragoman translate --ray [ADDRESS]`: the same translations on a Ray cluster (a local one started
for the run when no address is given), one engine per GPU, each in a Ray actor
(`TranslationWorker`) with its own TranslationSession; CPU actors where there is no GPU.

`WorkerPool` hands units of work to the actors, IN_FLIGHT at a time each (the next is queued when
one finishes): corpus shards (app.corpus.run, `translate`) and documents (`translate_documents`).
Inputs and outputs are read and written here, by the driver: a worker gets a shard's texts or a
document's bytes and gives back translations or the translated document, so the cluster's nodes
need the model but not the corpus, and every output is written atomically in one place. A worker
that dies (its process killed, its node lost) is replaced by a new actor and its unfinished units
go to the pool again; finished ones are never sent twice.

Plain actors rather than Ray Data: a shard is the unit of work, of resume (its file is its done
mark) and of output (written by our own format writers, byte for byte as without Ray), so Ray Data's
blocks, its own readers and writers (which would retype JSON and name files by task) and its
start-up would add nothing the pool needs.
"""

from __future__ import annotations

import os
import tempfile
from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from dragoman.app.corpus.run import CorpusRequest, ShardTranslation, translate_texts
from dragoman.app.session.jobs import DocumentJob, JobReport
from dragoman.app.settings import AppPaths
from dragoman.app.wording import counted, one_line

if TYPE_CHECKING:
    from dragoman.app.corpus.progress import RunProgress
    from dragoman.app.session.terms import Terms

RAY_MISSING = "--ray needs Ray: pip install 'dragoman[ray]'"
IN_FLIGHT = 2  # units queued on each worker
CPU_PER_WORKER = 4  # CPU cores per CPU engine when --workers is not given


def import_ray():
    try:
        import ray
    except ImportError:
        raise RuntimeError(RAY_MISSING) from None
    return ray


@dataclass(frozen=True)
class WorkerSpec:
    """What each worker builds its engine and pipeline from (the driver's model folder and stores:
    every node must see the model at that path)."""

    model: str
    dtype: str = "auto"
    adapters_dir: str | None = None
    gpu_memory: int | None = None
    terms: Terms | None = None
    paths: AppPaths | None = None  # the translation cache and memory (None: each node's default)


class TranslationWorker:
    """One engine and the pipeline over it, in a Ray actor's process."""

    def __init__(self, spec: WorkerSpec, device: str):
        from dragoman.app.session.session import TranslationSession
        from dragoman.engine import Translator

        translator = Translator(spec.model, device=device, dtype=spec.dtype, adapters_dir=spec.adapters_dir,
                                gpu_memory=spec.gpu_memory)
        self.pipeline = TranslationSession.open(translator, spec.paths, spec.terms)

    def pid(self) -> int:
        return os.getpid()

    def translate_shard(self, request: CorpusRequest, texts: list[str | None]) -> ShardTranslation:
        return translate_texts(self.pipeline, request, texts)

    def translate_document(self, job: DocumentJob, data: bytes) -> tuple[bytes | None, JobReport, str | None]:
        """(the translated document, its report, None), or (None, report, the error's first line)."""
        report = JobReport()
        with tempfile.TemporaryDirectory(prefix="dragoman-") as folder:
            source = Path(folder) / "in" / job.source_path.name
            source.parent.mkdir()
            source.write_bytes(data)
            local = replace(job, source_path=source, output_path=Path(folder) / "out" / job.output_path.name,
                            overwrite=True)
            try:
                return self.pipeline.translate_document(local, report=report).read_bytes(), report, None
            except Exception as e:  # DocumentError, a file the format library choked on...
                return None, report, one_line(e)


class WorkerPool:
    """The run's workers on a Ray cluster: `address` None starts a local one (unless this process is
    connected already), shut down by `close`. `workers`: how many (default: one per GPU of the
    cluster; on the CPU, one per CPU_PER_WORKER cores)."""

    def __init__(self, spec: WorkerSpec, device: str, address: str | None, workers: int | None,
                 progress: RunProgress | None = None):
        ray = import_ray()
        self.ray = ray
        self.started = not ray.is_initialized()
        if self.started:
            ray.init(address=address or None, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
        resources = ray.cluster_resources()
        gpus, cpus = int(resources.get("GPU", 0)), resources.get("CPU", 1)
        on_gpu = gpus > 0 and device != "cpu"
        if device.startswith("cuda") and not gpus:
            raise RuntimeError(f"--device {device}: the Ray cluster has no GPU")
        count = workers or (gpus if on_gpu else max(1, int(cpus) // CPU_PER_WORKER))
        if on_gpu and count > gpus:
            raise RuntimeError(f"--workers {count}: the Ray cluster has {counted(gpus, 'GPU')}")
        # An actor sees its own GPU as cuda:0 (Ray sets CUDA_VISIBLE_DEVICES).
        self.options = dict(num_gpus=1, num_cpus=1) if on_gpu else dict(num_cpus=max(1, int(cpus) // count)
                                                                          if count <= cpus else cpus / count)
        self.device = "cuda" if on_gpu else "cpu"
        self.spec = spec
        self.progress = progress
        self.actor_class = ray.remote(TranslationWorker)
        self.actors = [self.new_actor(i) for i in range(count)]

    def name(self, index: int) -> str:
        """The Ray name of worker `index` (a replacement takes the same)."""
        return f"dragoman-{os.getpid()}-worker-{index}"

    def new_actor(self, index: int):
        actor = self.actor_class.options(name=self.name(index), max_restarts=0, **self.options).remote(
            self.spec, self.device)
        self.ray.get(actor.pid.remote())  # loaded: an engine that cannot load fails here, not in a loop
        return actor

    def close(self) -> None:
        for actor in self.actors:
            self.ray.kill(actor)
        if self.started:
            self.ray.shutdown()

    def run(self, method: str, work: Iterator[tuple[Any, tuple]]) -> Iterator[tuple[Any, Any, str]]:
        """`method(*args)` of a worker for each (key, args) of `work`, taken as there is room; yields
        (key, result, worker name) as each finishes. A unit whose worker died goes to the pool again."""
        from ray.exceptions import RayActorError, RayTaskError

        load = [0] * len(self.actors)
        in_flight: dict = {}  # object ref -> (key, args, worker index, actor)
        again: deque = deque()
        exhausted = False
        while True:
            for index in range(len(self.actors)):
                while load[index] < IN_FLIGHT:
                    if again:
                        key, args = again.popleft()
                    elif not exhausted:
                        try:
                            key, args = next(work)
                        except StopIteration:
                            exhausted = True
                            break
                    else:
                        break
                    actor = self.actors[index]
                    in_flight[getattr(actor, method).remote(*args)] = (key, args, index, actor)
                    load[index] += 1
            if not in_flight:
                return
            [ref], _ = self.ray.wait(list(in_flight), num_returns=1)
            key, args, index, actor = in_flight.pop(ref)
            load[index] -= 1
            try:
                result = self.ray.get(ref)
            except RayTaskError as e:  # the worker's own error (out of memory...): said as raised there
                raise e.cause if isinstance(e.cause, Exception) else e from None
            except RayActorError:
                again.append((key, args))
                if self.actors[index] is actor:  # the first of its units to fail: replace it once
                    self.ray.kill(actor)
                    self.actors[index] = self.new_actor(index)
                    if self.progress is not None:
                        self.progress.worker_replaced()
                continue
            yield key, result, f"w{index}"

    # -- the units -----------------------------------------------------------------------------------

    def translate(self, request: CorpusRequest, work: Iterator[tuple[Any, list[str | None]]]
                  ) -> Iterator[tuple[Any, ShardTranslation, str]]:
        """Corpus shards (app.corpus.run.ShardTranslator)."""
        return self.run("translate_shard", ((key, (request, texts)) for key, texts in work))

    def translate_documents(self, jobs: list[DocumentJob]) -> Iterator[tuple[DocumentJob, bytes | None, JobReport, str | None, str]]:
        """(job, translated bytes or None, report, error or None, worker) for each job, in the jobs' order."""
        work = ((number, (job, job.source_path.read_bytes())) for number, job in enumerate(jobs))
        finished: dict[int, tuple] = {}
        next_number = 0
        for number, (data, report, error), worker in self.run("translate_document", work):
            finished[number] = (data, report, error, worker)
            while next_number in finished:
                yield (jobs[next_number], *finished.pop(next_number))
                next_number += 1
