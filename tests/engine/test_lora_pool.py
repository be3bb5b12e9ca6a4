"""The pool of adapter slots: reference counts, the least recently used idle slot evicted and a held
one never, files changed on disk picked up by the requests admitted afterwards, and adapters read
off the step loop, so that the requests beside one whose adapter is being read are not held back."""

import shutil
import threading

import pytest
import torch
from peft_adapters import NAMES, TEXTS, copy_adapter, peft_expectations, requests_for

from dragoman.engine import lora_pool
from dragoman.engine.generator import Generator
from dragoman.engine.lora_pool import LoraPool, NoFreeSlot
from dragoman.engine.peft_adapter import AdapterError, load_adapter


@pytest.fixture(scope="module")
def expected(peft_adapters, hf_model, hf_tokenizer):
    """{(adapter or None, option set index, text index): PEFT's token ids}."""
    return peft_expectations(peft_adapters[1], hf_model, hf_tokenizer)


def test_more_adapters_than_slots_wait_for_a_free_slot(peft_adapters, lora_translator, expected):
    generator = Generator.build(lora_translator.generator.model, adapters_dir=peft_adapters[0], adapter_slots=2)
    cases = [(name, 0) for name in NAMES] + [(None, 1), ("attn", 1)]
    results = [r.result for r in generator.run(requests_for(lora_translator, cases, 1))]
    assert results == [expected[name, 1, t] for name, t in cases]
    pool = generator.lora
    assert pool.refs == [0, 0] and len(pool.resident()) == 2
    # The least recently used idle adapter is the one evicted.
    resident = pool.resident()
    oldest = min(resident, key=lambda n: pool.last_used[resident[n]])
    slot, evicted = pool.promote_lora_from_disk(peft_adapters[0] / "encoder-only", "encoder-only")
    assert evicted == oldest and slot == resident[oldest]


def test_preempted_requests_give_their_slot_back_and_end_the_same(make_translator, peft_adapters, expected):
    cramped = make_translator(cache_tokens=4 * 48, adapters_dir=peft_adapters[0], adapter_slots=2)
    cases = [(name, t) for t in range(len(TEXTS)) for name in ("attn", None, "ffn-rslora")]
    results = [r.result for r in cramped.generator.run(requests_for(cramped, cases, 0))]
    assert results == [expected[name, 0, t] for name, t in cases]
    assert cramped.generator.lora.refs == [0, 0]


def settle(pool):
    """Wait for the pool's reads under way, and install what they read where a slot is free."""
    installed = []
    while pool._reads:
        installed += pool.install_staged(timeout=1.0)
    return installed + pool.install_staged()


def test_a_held_slot_is_never_evicted(peft_adapters, lora_translator):
    folder = peft_adapters[0]
    pool = LoraPool(lora_translator.config, 2, torch.device("cpu"), torch.float32, folder)
    a, _ = pool.promote_lora_from_disk(folder / "attn", "attn")
    b, _ = pool.promote_lora_from_disk(folder / "ffn-rslora", "ffn-rslora")
    assert pool.slot_for("attn") == a and pool.slot_for("ffn-rslora") == b  # resident: ready at once
    pool.acquire_adapter_slot(a)
    pool.acquire_adapter_slot(b)
    assert pool.slot_for("encoder-only") is None  # not resident: its read starts
    assert settle(pool) == [] and pool.slot_for("encoder-only") is None  # read, but both slots are held
    assert pool.identity_of("encoder-only") == load_adapter(folder / "encoder-only", lora_translator.config).identity
    with pytest.raises(NoFreeSlot):
        pool.promote_lora_from_disk(folder / "decoder-only", "decoder-only")
    pool.release_adapter_slot(a)
    assert pool.install_staged() == ["encoder-only"] and pool.slot_for("encoder-only") == a
    with pytest.raises(RuntimeError, match="held"):
        pool.swap_lora_from_disk(folder / "attn", "attn", b)
    pool.release_adapter_slot(b)
    pool.swap_lora_from_disk(folder / "attn", "attn", b)
    assert pool.resident() == {"encoder-only": a, "attn": b}
    with pytest.raises(AssertionError, match="released more often"):
        pool.release_adapter_slot(b)


def test_the_least_recently_used_idle_adapter_makes_room(peft_adapters, lora_translator):
    folder = peft_adapters[0]
    pool = LoraPool(lora_translator.config, 2, torch.device("cpu"), torch.float32, folder)
    for name in ("attn", "ffn-rslora"):
        pool.promote_lora_from_disk(folder / name, name)
    pool.release_adapter_slot(pool.acquire_adapter_slot(pool.slot_for("attn")))  # used after ffn-rslora
    assert pool.slot_for("encoder-only") is None and settle(pool) == ["encoder-only"]
    assert sorted(pool.resident()) == ["attn", "encoder-only"]


def test_the_stacks_grow_only_for_new_modules_or_larger_ranks(peft_adapters, lora_translator):
    """Growing the stacks bumps `layout` (graphs over them are captured again); an adapter that
    fits them is copied in place, and what a slot's earlier adapter had is cleared."""
    folder = peft_adapters[0]
    pool = LoraPool(lora_translator.config, 2, torch.device("cpu"), torch.float32, folder)
    layers = pool.layers
    a, _ = pool.promote_lora_from_disk(folder / "ffn-rslora", "ffn-rslora")  # rank 8
    first = layers.layout
    k_proj = layers.stacks["encoder.layers.0.self_attn.k_proj"]
    pool.promote_lora_from_disk(folder / "ffn-rslora", "ffn-rslora")
    assert layers.layout == first  # the same modules: no new stacks
    pool.swap_lora_from_disk(folder / "attn", "attn", a)  # rank 4 q and v: new modules
    assert layers.layout == first + 1
    assert layers.stacks["encoder.layers.0.self_attn.k_proj"] is k_proj
    assert k_proj.a[a].abs().sum() == 0 and k_proj.scale[a] == 0  # ffn-rslora's k_proj left the slot
    q_proj = layers.stacks["encoder.layers.0.self_attn.q_proj"]
    assert q_proj.a.shape[1] == 4 and q_proj.a[a].abs().sum() > 0


def test_staged_copies_are_in_the_slots_dtype(peft_adapters, lora_translator):
    adapter = load_adapter(peft_adapters[0] / "layer1-norms", lora_translator.config)
    staged = lora_pool.staged(adapter, torch.bfloat16, pin=False)
    for module, lora in adapter.lora.items():
        assert staged.lora[module].a.dtype == torch.bfloat16
        assert torch.equal(staged.lora[module].a, lora.a.to(torch.bfloat16))
        assert torch.equal(staged.lora[module].b, lora.b.to(torch.bfloat16))
        assert staged.lora[module].scale == lora.scale
    for module, (weight, bias) in adapter.norms.items():
        assert torch.equal(staged.norms[module][0], weight) and torch.equal(staged.norms[module][1], bias)
    assert (staged.name, staged.identity, staged.signature) == (adapter.name, adapter.identity, adapter.signature)


def test_a_swap_under_load_leaves_running_requests_alone(peft_adapters, lora_translator, expected):
    """`live` is replaced on disk while its first request decodes: that request finishes on the old
    weights, the one admitted afterwards gets the new ones, and the old slot is freed."""
    folder = peft_adapters[0].parent / "swap-adapters"
    copy_adapter(peft_adapters[0] / "attn", folder / "live")
    generator = Generator.build(lora_translator.generator.model, max_rows=4, adapters_dir=folder, adapter_slots=2)
    [first, second, base] = requests_for(lora_translator, [("live", 0), ("live", 1), (None, 2)], 0)
    identities = []

    def swap(_):
        if not identities:
            identities.append(generator.lora.identities[generator.lora.resident()["live"]])
            copy_adapter(peft_adapters[0] / "ffn-rslora", folder / "live")

    first.on_partial = swap
    generator.run([first, second, base])  # max_rows=4 and 4 beams: one sentence at a time
    assert first.result == expected["attn", 0, 0]
    assert second.result == expected["ffn-rslora", 0, 1]
    assert base.result == expected[None, 0, 2]
    pool = generator.lora
    assert sum(pool.refs) == 0 and list(pool.resident()) == ["live"]
    assert pool.identities[pool.resident()["live"]] not in (identities[0], 0)
    # Removed: its requests fail by name, the others run.
    shutil.rmtree(folder / "live")
    gone, other = requests_for(lora_translator, [("live", 0), (None, 0)], 1)
    generator.run([gone, other])
    assert gone.result is None and "no such folder" in gone.error and other.result == expected[None, 1, 0]


def test_an_identity_asked_for_waits_for_the_one_read(peft_adapters, lora_translator, monkeypatch):
    reads = []
    real = lora_pool.load_adapter
    monkeypatch.setattr(lora_pool, "load_adapter", lambda path, *args: reads.append(path.name) or real(path, *args))
    pool = LoraPool(lora_translator.config, 2, torch.device("cpu"), torch.float32, peft_adapters[0])
    identity = pool.identity_of("attn")
    assert identity == load_adapter(peft_adapters[0] / "attn", lora_translator.config).identity
    assert pool.slot_for("attn") is not None and pool.identities[pool.slot_for("attn")] == identity
    assert reads == ["attn"]


def test_identity_follows_the_files(make_translator, peft_adapters, tmp_path):
    copy_adapter(peft_adapters[0] / "attn", tmp_path / "x")
    t = make_translator(adapters_dir=tmp_path)
    before = t.adapter_identity("x")
    assert t.adapter_identity(None) == "" and before.startswith("x:") and t.adapter_identity("x") == before
    copy_adapter(peft_adapters[0] / "decoder-only", tmp_path / "x")
    assert t.adapter_identity("x") != before




class SlowRead:
    """load_adapter as the staging thread calls it, held for one adapter until `release`: the read of
    a large file on a slow disk. The hold gives up after a minute, so that a step loop that waits
    for the read fails the test instead of hanging it."""

    def __init__(self, monkeypatch, name):
        self.name = name
        self.released = threading.Event()
        self.waited: list[bool] = []  # per held read: whether it was released (False: it gave up)
        real = lora_pool.load_adapter

        def load(path, config, name=None):
            if name == self.name:
                self.waited.append(self.released.wait(timeout=60))
            return real(path, config, name)

        monkeypatch.setattr(lora_pool, "load_adapter", load)


@pytest.mark.parametrize("pipelined", [False, True], ids=["cpu-order", "gpu-order"])
def test_a_slow_adapter_read_holds_back_only_its_own_requests(peft_adapters, lora_translator, expected, monkeypatch,
                                                             pipelined):
    """While `attn` is read, a base-model request and one on a resident adapter run their steps
    as they would alone; `attn`'s request starts once its read is done, and ends as PEFT's."""
    folder = peft_adapters[0]
    generator = Generator.build(lora_translator.generator.model, adapters_dir=folder, adapter_slots=2)
    generator.pipelined = pipelined
    generator.lora.promote_lora_from_disk(folder / "ffn-rslora", "ffn-rslora")
    cases = [("attn", 0), (None, 1), ("ffn-rslora", 2)]

    def steps_alone(case):
        [request] = requests_for(lora_translator, [case], 0)
        steps = []
        request.on_partial = steps.append
        generator.run([request])
        return len(steps)

    alone = [steps_alone(case) for case in cases[1:]]
    slow = SlowRead(monkeypatch, "attn")
    requests = requests_for(lora_translator, cases, 0)
    steps = [[] for _ in requests]
    for request, seen in zip(requests, steps):
        request.on_partial = lambda tokens, seen=seen: seen.append(slow.released.is_set())

    def done(request):
        if all(r.result is not None for r in requests[1:]):
            slow.released.set()  # the others are done: now the read may end

    for request in requests:
        request.on_done = done
    generator.run(requests)
    assert [r.result for r in requests] == [expected[name, 0, t] for name, t in cases]
    assert slow.waited == [True]  # the read was held until the others were done: they did not wait for it
    assert [len(s) for s in steps[1:]] == alone and not any(s for seen in steps[1:] for s in seen)
    assert steps[0] and all(steps[0])  # attn's steps all came after its read
    assert sum(generator.lora.refs) == 0


def test_a_broken_adapter_read_off_the_loop_fails_its_requests_alone(peft_adapters, lora_translator, expected,
                                                                      tmp_path, monkeypatch):
    """A broken adapter found so by its read fails each request naming it with the read's one line;
    the others run. The error stands, without another read, until the files change."""
    for name in ("good", "broken"):
        copy_adapter(peft_adapters[0] / "attn", tmp_path / name)
    weights = tmp_path / "broken" / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    with pytest.raises(AdapterError) as refused:
        load_adapter(tmp_path / "broken", lora_translator.config)
    reads = []
    real = lora_pool.load_adapter
    monkeypatch.setattr(lora_pool, "load_adapter", lambda path, *args: reads.append(path.name) or real(path, *args))
    generator = Generator.build(lora_translator.generator.model, adapters_dir=tmp_path, adapter_slots=2)
    requests = requests_for(lora_translator, [("broken", 0), ("good", 0), (None, 1), ("broken", 2)], 1)
    generator.run(requests)
    assert [r.error for r in requests] == [str(refused.value), None, None, str(refused.value)]
    assert [r.result for r in requests[1:3]] == [expected["attn", 1, 0], expected[None, 1, 1]]
    assert "\n" not in str(refused.value) and str(weights) in str(refused.value)
    assert sorted(reads) == ["broken", "good"]
    with pytest.raises(AdapterError, match="truncated"):
        generator.lora.slot_for("broken")
    assert sorted(reads) == ["broken", "good"]  # known broken: not read again
    copy_adapter(peft_adapters[0] / "ffn-rslora", tmp_path / "broken")  # mended
    [mended] = requests_for(lora_translator, [("broken", 1)], 1)
    generator.run([mended])
    assert mended.error is None and mended.result == expected["ffn-rslora", 1, 1]


def test_changed_files_are_read_again_for_new_requests(peft_adapters, lora_translator, expected, tmp_path):
    copy_adapter(peft_adapters[0] / "attn", tmp_path / "live")
    generator = Generator.build(lora_translator.generator.model, adapters_dir=tmp_path, adapter_slots=2)
    [before] = requests_for(lora_translator, [("live", 0)], 1)
    generator.run([before])
    pool = generator.lora
    slot = pool.slot_for("live")
    identity = pool.identities[slot]
    copy_adapter(peft_adapters[0] / "decoder-only", tmp_path / "live")
    assert pool.slot_for("live") is None and pool.resident() == {}  # the old copy is retired at once
    [after] = requests_for(lora_translator, [("live", 0)], 1)
    generator.run([after])
    assert (before.result, after.result) == (expected["attn", 1, 0], expected["decoder-only", 1, 0])
    assert pool.identities[pool.slot_for("live")] not in (identity, 0)
