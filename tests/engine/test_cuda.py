"""The engine on a CUDA GPU (skipped where there is none, as in CI): the Triton kernels and the
batched GPU paths must give the reference's tokens in float32, and run in the low precisions.


The GPU may stand for a smaller card (DRAGOMAN_GPU_PROFILE, kernels/gpu_profile.py): its half precision
is then the card's, and the last test checks that no kernel compiled here needs more shared memory
than that card has."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from dragoman import kernels
from bench.shared_memory import over_limit, report
from dragoman.engine import admission
from dragoman.engine.device import gpu_profile
from dragoman.engine.generator import Generator, Request

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

REPO = Path(__file__).resolve().parents[2]
TEXTS = ["The quick brown fox jumps over the lazy dog.", "Привет, как дела?", "我们明天去北京。", "Ein kurzer Satz"]
BFLOAT16 = torch.cuda.is_available() and gpu_profile(torch.device("cuda", 0)).has_bfloat16
HALF = "bfloat16" if BFLOAT16 else "float16"  # the card's own: the automatic precision
HALVES = ["bfloat16", "float16"] if BFLOAT16 else ["float16"]


@pytest.fixture(autouse=True)
def kernels_ran():
    """A kernel that failed would leave its reference doing the work unseen: none may, here."""
    yield
    assert kernels.unavailable_message() is None


@pytest.mark.parametrize("options", [dict(num_beams=4), dict(num_beams=1), dict(num_beams=4, repetition_penalty=1.3)])
def test_float32_on_the_gpu_equals_the_cpu(make_translator, translator, options):
    gpu = make_translator(device="cuda", dtype="float32")
    expected = translator.translate(TEXTS, "eng_Latn", "fra_Latn", translator.default_options(max_length=40, **options))
    assert gpu.translate(TEXTS, "eng_Latn", "fra_Latn", gpu.default_options(max_length=40, **options)) == expected


def test_sentences_of_several_option_groups_in_one_step_on_the_gpu_equal_the_cpu(make_translator, translator):
    """Beam and greedy sentences, some streaming partial results, decode in the same steps (not one
    graph: each group searches and reports after the step) and end as on the CPU."""
    gpu = make_translator(device="cuda", dtype="float32")
    results = []
    for engine in (translator, gpu):
        tok, partials = engine.tokenizer, []
        requests = [Request(tok.encode_source(text, "eng_Latn"), tok.decoder_prefix("fra_Latn"),
                            engine.default_options(num_beams=4 if i % 2 else 1, max_length=30),
                            on_partial=partials.append if i < 2 else None)
                    for i, text in enumerate(TEXTS)]
        engine.generator.run(requests)
        results.append(([r.result for r in requests], partials))
    assert results[1] == results[0]
    assert results[1][1], "partial results streamed"


@pytest.mark.parametrize("options", [dict(num_beams=4), dict(num_beams=1)])
def test_scores_and_alternatives_on_the_gpu_equal_the_cpu(make_translator, translator, options):
    """Through the graphs (a lone typed sentence, then a batch), pipelined: the hypotheses read
    after the next step was queued, greedy's scores summed in a graph of their own."""
    gpu = make_translator(device="cuda", dtype="float32")
    n = options["num_beams"]
    results = []
    for engine in (translator, gpu):
        chosen = engine.default_options(max_length=40, **options)
        [alone] = engine.translate_full(TEXTS[:1], "eng_Latn", "fra_Latn", chosen, alternatives=n, priority=0)
        batch = engine.translate_full(TEXTS, "eng_Latn", "fra_Latn", chosen, alternatives=n)
        plain = engine.translate(TEXTS, "eng_Latn", "fra_Latn", chosen)
        results.append(([alone, *batch], plain))
    (cpu, cpu_plain), (ours, plain) = results
    assert plain == cpu_plain == [t.text for t in ours[1:]]
    for expected, got in zip(cpu, ours):
        assert [t.text for t in [got, *got.alternatives]] == [t.text for t in [expected, *expected.alternatives]]
        assert [t.score for t in [got, *got.alternatives]] == pytest.approx(
            [t.score for t in [expected, *expected.alternatives]], abs=1e-4)
        assert len(got.alternatives) == n - 1


def test_a_warmed_up_gpu_translates_as_the_cpu_and_holds_nothing_back(make_translator, translator):
    """The warm-up at load (graphs captured for typed text's options) leaves results and memory as they were."""
    gpu = make_translator(device="cuda", dtype="float32")
    assert gpu.needs_warm_up()
    gpu.warm_up(num_beams=4, max_length=40)  # as the worker does with typed text's options
    generator = gpu.generator
    assert generator.num_free_blocks() == generator.num_total_blocks()
    assert generator.rows.num_free_rows() == generator.rows.capacity
    options = dict(num_beams=4, max_length=40)
    expected = translator.translate(TEXTS, "eng_Latn", "fra_Latn", translator.default_options(**options))
    assert gpu.translate(TEXTS, "eng_Latn", "fra_Latn", gpu.default_options(**options)) == expected


def test_document_steps_prepared_on_padding_rows_leave_translations_as_they_were(make_translator, translator):
    """`prepare_document_steps` (the window's, after its warm-up): each plain step shape run and
    captured on padding rows alone, in the engine's idle time; a document then replays them and
    translates as the CPU does, its memory all free after."""
    from polling import wait_for

    gpu = make_translator(device="cuda", dtype="float32")
    options = dict(num_beams=4, max_length=40)
    gpu.prepare_document_steps(**options)
    assert wait_for(lambda: not gpu.generator.idle_work)
    runner, prepared = gpu.generator.runner, gpu.default_options(**options)
    sizes = runner.step_sizes(prepared)
    assert sizes and all((size, False, prepared, False, parity, 0, False, None) in runner.graphs.graphs
                         for size in sizes for parity in (0, 1))  # `_search_in_graph`'s keys, captured
    texts = [f"{text} {i}" for i in range(8) for text in TEXTS]
    expected = translator.translate(texts, "eng_Latn", "fra_Latn", translator.default_options(**options))
    assert gpu.translate(texts, "eng_Latn", "fra_Latn", gpu.default_options(**options)) == expected
    assert gpu.generator.num_free_blocks() == gpu.generator.num_total_blocks()


@pytest.mark.parametrize("terms", [None, ["chat"]], ids=["plain", "with a term"])
def test_a_document_paced_while_a_person_types_translates_as_the_cpu(make_translator, translator, terms):
    """While a person types, a document's steps advance a part of its group at a time
    (`Scheduler.pacing`): graphs of the parts' sizes, a constrained part's tables of its own."""
    gpu = make_translator(device="cuda", dtype="float32")
    gpu.generator.scheduler.paced_rows = 16
    texts = [f"{text} {i}" for i in range(8) for text in TEXTS]
    kwargs = {} if terms is None else {"terms": [terms] * len(texts)}
    expected = translator.translate(texts, "eng_Latn", "fra_Latn", translator.default_options(num_beams=4, max_length=40),
                                    **kwargs)
    gpu.expect_typing(600)
    assert gpu.translate(texts, "eng_Latn", "fra_Latn", gpu.default_options(num_beams=4, max_length=40), **kwargs) == expected


@pytest.mark.parametrize("dtype", HALVES)
def test_low_precision_runs_and_frees_its_blocks(make_translator, dtype):
    gpu = make_translator(device="cuda", dtype=dtype)
    out = gpu.translate(TEXTS, "eng_Latn", "deu_Latn", gpu.default_options(max_length=40))
    assert all(isinstance(t, str) and t for t in out)
    assert gpu.generator.num_free_blocks() == gpu.generator.num_total_blocks()


def test_mixed_lora_adapters_on_the_gpu_equal_the_cpu(make_translator, peft_adapters):
    """The LoRA kernel in CUDA graphs: every adapter and the base model in one batch, float32."""
    folder, models = peft_adapters
    cpu = make_translator(adapters_dir=folder, adapter_slots=len(models))
    gpu = make_translator(device="cuda", dtype="float32", adapters_dir=folder, adapter_slots=len(models))
    for translator in (cpu, gpu):  # resident before the run: no read on the pool's thread decides what a step holds
        for name in models:
            translator.generator.lora.promote_lora_from_disk(folder / name, name)
    tok, options = cpu.tokenizer, cpu.default_options(num_beams=4, max_length=40)
    cases = [(text, name) for text in TEXTS for name in [None, *models]]

    def run(translator):
        return [r.result for r in translator.generator.run(
            [Request(tok.encode_source(text, "eng_Latn"), tok.decoder_prefix("fra_Latn"), options, adapter=name)
             for text, name in cases]
        )]

    assert gpu.generator.runner.graphs is not None
    assert run(gpu) == run(cpu)


def test_chained_kernel_launches_give_the_same_tokens_as_plain_ones(make_translator, monkeypatch):
    """Programmatic dependent launch (Hopper on) starts each kernel of a step before the last one
    ends; a kernel that read its input before waiting would change the tokens."""
    import dragoman.kernels._triton

    def translate():
        gpu = make_translator(device="cuda", dtype=HALF)
        return [gpu.translate(TEXTS, "eng_Latn", "fra_Latn", gpu.default_options(max_length=40, num_beams=beams))
                for beams in (1, 4)]

    chained = translate()
    monkeypatch.setattr(kernels._triton, "_CHAINED", False)
    assert translate() == chained


def test_a_folded_source_on_the_gpu_translates_as_the_cpu_in_float32(make_translator, translator):
    """A typed sentence's steps through its folded source (engine.model.FoldedSources, with
    kernels.source_scores compiled), at S 16 and 32, in float32: the CPU's tokens."""
    gpu = make_translator(device="cuda", dtype="float32")
    gpu.generator = Generator.build(gpu.generator.model, fold_sources=True)
    for text, S in (("Привет, как дела?", 16), ("The quick brown fox jumps.", 32)):  # 15 and 25 tokens
        for beams in (4, 1):
            expected = translator.translate([text], "eng_Latn", "fra_Latn",
                                            translator.default_options(max_length=40, num_beams=beams))
            assert gpu.translate([text], "eng_Latn", "fra_Latn", gpu.default_options(max_length=40, num_beams=beams)) == expected
            assert gpu.generator.runner.folded.slots == S


@pytest.mark.parametrize("dtype", HALVES)
def test_a_folded_source_in_half_precision_agrees_with_the_source_cache(make_translator, dtype, monkeypatch):
    """Half precision folds a typed sentence's source by default, in the encoder's graph; the folded
    keys and values are rounded to it, so each layer's cross-attention sublayer must agree with the
    plain one in float32 to that rounding; and its steps, chained or not, give the same tokens."""
    import dragoman.kernels._triton

    gpu = make_translator(device="cuda", dtype=dtype)
    runner, model, folded, cache = gpu.generator.runner, gpu.generator.model, gpu.generator.runner.folded, gpu.generator.cross_cache
    assert folded is not None and runner.encoder_graphs is not None
    source = gpu.tokenizer.encode_source("The quick brown fox jumps.", "eng_Latn")  # 25 tokens: S = 32, 7 padded
    H, D, C = model.heads, model.head_dim, model.config.d_model
    held = []
    for graphs in (runner.encoder_graphs, None):  # the graph's fold, then the eager encoder's
        runner.encoder_graphs = graphs
        [seq] = admission.encode_sources(runner, [source], fold=32)
        held.append([t.float() for t in folded._at(32)])  # a, c, b
        assert folded.slots == 32 and int(folded.length) == 25
        if graphs is not None:
            cache.free_sequence(seq)
    for graphed, eager in zip(*held):
        assert (graphed - eager).norm() / eager.norm() < 2e-2  # the padded matmuls may pick other kernels
    slots = cache.slots_of([seq], torch.device("cuda"))  # (25,)
    h = torch.randn(4, C, generator=torch.Generator().manual_seed(0)).to("cuda", getattr(torch, dtype))  # (N, C)
    for i, layer in enumerate(model.decoder_layers):
        q = (h.float() @ layer.cross_q.weight.float().T + layer.cross_q.bias.float()).view(4, H, D)  # (N, H, D)
        k, v = cache.k[i, slots].float(), cache.v[i, slots].float()  # (25, H, D) each
        attended = torch.einsum("nhs,shd->nhd", (torch.einsum("nhd,shd->nhs", q, k) * model.scale).softmax(-1), v)
        expected = attended.reshape(4, C) @ layer.cross_out.weight.float().T + layer.cross_out.bias.float()  # (N, C)
        error = (folded.attend(i, h, model.scale).float() - expected).norm(dim=-1) / expected.norm(dim=-1)  # (N,)
        assert error.max() < 0.03  # bfloat16 itself: ~0.4% a value

    def translate():
        translator = make_translator(device="cuda", dtype=dtype)
        out = [translator.translate([text], "eng_Latn", "fra_Latn", translator.default_options(max_length=40, num_beams=beams))
               for text in ("Привет, как дела?", "The quick brown fox jumps.") for beams in (4, 1)]
        assert translator.generator.runner.folded.slots == 32
        return out

    chained = translate()
    monkeypatch.setattr(kernels._triton, "_CHAINED", False)
    assert translate() == chained


def test_the_packed_encoder_agrees_with_float32(make_translator):
    """In half precision the encoder attends over packed sources (kernels.packed_attention, each
    token's source given); a source that attended across its neighbours would be far off."""
    low = make_translator(device="cuda", dtype=HALF).generator.model
    exact = make_translator(device="cuda", dtype="float32").generator.model
    generator = torch.Generator().manual_seed(0)
    lengths = [3, 17, 9, 30]
    tokens = torch.randint(4, low.config.vocab_size, (len(lengths), max(lengths)), generator=generator)
    for row, n in zip(tokens, lengths):
        row[n - 1] = low.config.eos_id
        row[n:] = low.config.pad_id
    tokens = torch.cat([row[:n] for row, n in zip(tokens, lengths)]).cuda()  # (T,) packed
    packed = low.encode(tokens, lengths).float()  # (T, C)
    expected = exact.encode(tokens, lengths)  # (T, C)
    error = (packed - expected).norm(dim=-1) / expected.norm(dim=-1)  # (T,) per token
    # bfloat16 itself: ~3% on average, under 10% at worst here (the padded path on the CPU measures the same)
    assert error.mean() < 0.06 and error.max() < 0.25


@pytest.mark.parametrize("with_adapter", [False, True])
def test_a_typed_sentence_is_encoded_by_a_graph_as_without_one(make_translator, peft_adapters, with_adapter):
    """A lone short source is encoded by a CUDA graph of its length bucket, padded with a second
    source of padding: the cross K/V it stores must be the eager encoder's (to bfloat16 rounding:
    the padded matmuls may pick other kernels), also when two sources replay one bucket's graph,
    and with a LoRA adapter."""
    folder, models = peft_adapters
    gpu = make_translator(device="cuda", dtype=HALF, adapters_dir=folder)
    generator, runner = gpu.generator, gpu.generator.runner
    graphs = runner.encoder_graphs
    assert graphs is not None
    name = next(iter(models))
    slot = generator.lora.promote_lora_from_disk(folder / name, name)[0] if with_adapter else -1
    sources = [gpu.tokenizer.encode_source(text, "eng_Latn") for text in TEXTS]

    def stored_kv():
        out = []
        for source in sources:
            [seq] = admission.encode_sources(runner, [source], [slot])
            slots = generator.cross_cache.slots_of([seq], torch.device("cuda"))
            out.append(torch.stack([generator.cross_cache.k[:, slots], generator.cross_cache.v[:, slots]]).float())
            generator.cross_cache.free_sequence(seq)
        return out

    replayed = stored_kv()
    runner.encoder_graphs = None
    for graphed, eager in zip(replayed, stored_kv()):
        assert (graphed - eager).norm() / eager.norm() < 2e-2
    assert len(graphs.graphs) < len(sources)  # some sources shared a bucket's graph


def test_without_a_c_compiler_the_gpu_translates_as_the_cpu_through_the_references(tiny_checkpoint, translator,
                                                                                   tmp_path):
    """Triton builds its launchers with the C compiler at first use: with none (CC names a missing
    one, and an empty cache), every kernel falls back to its reference, graphs are not captured,
    the tokens are the CPU's, and the log says so once."""
    code = textwrap.dedent("""
        import json, sys
        from dragoman.engine.translator import Translator
        gpu = Translator(sys.argv[1], device="cuda", dtype="float32")
        texts = json.loads(sys.argv[2])
        print(json.dumps([gpu.translate(texts, "eng_Latn", "fra_Latn", gpu.default_options(max_length=40, num_beams=b))
                          for b in (4, 1)]))
        print(gpu.kernels_unavailable())
    """)
    env = {**os.environ, "CC": str(tmp_path / "no-compiler"), "TRITON_CACHE_DIR": str(tmp_path / "triton")}
    done = subprocess.run([sys.executable, "-c", code, str(tiny_checkpoint), json.dumps(TEXTS)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    translations, message = done.stdout.strip().splitlines()[-2:]
    expected = [translator.translate(TEXTS, "eng_Latn", "fra_Latn",
                                     translator.default_options(max_length=40, num_beams=b)) for b in (4, 1)]
    assert json.loads(translations) == expected
    assert message.startswith("GPU kernels unavailable: ") and message.endswith("; using the slower PyTorch path")
    assert done.stderr.count("GPU kernels unavailable") == 1, done.stderr[-3000:]


def test_600m_shaped_activations_stay_finite_in_float16():
    """float16 (Turing's precision) holds 600M's activations: the encoder's output and every
    step's logits finite, with weights scaled to make each layer's output of order one (std
    3 / sqrt(fan in)) and float32 sums."""
    from bench.__main__ import random_weights, sentence, shape_config
    from dragoman.engine.decoding import DecodingOptions
    from dragoman.engine.model import NllbModel
    import random

    config, device = shape_config("600M"), torch.device("cuda")
    weights = random_weights(config, device, torch.float16)
    for name, w in weights.items():
        if w.dim() == 2 and not name.startswith(("embed_tokens", "lm_head")):
            weights[name] = (w.float() * (3 / w.shape[1] ** 0.5 / 0.02)).half()
    model = NllbModel(config, weights, max_positions=1024)
    generator = Generator.build(model, graphs=False)
    finite = []

    def checked(fn):
        def run(*args, **kwargs):
            out = fn(*args, **kwargs)
            if out is not None:
                finite.append(bool(torch.isfinite(out).all()))
            return out
        return run

    model.encode_packed = checked(model.encode_packed)
    model.decode_step = checked(model.decode_step)
    rng = random.Random(0)
    options = DecodingOptions(num_beams=4, min_new_tokens=16, max_new_tokens=16)
    generator.run([Request(sentence(n, rng), [2, 256047], options) for n in (32, 10, 60, 200)])
    assert len(finite) == 16 and all(finite)  # the encoder's output and each step's logits
    # A typed sentence (its encoder's 48 rows and its steps' 4 through fused_linear, in graphs) and a
    # few sentences more, so that the last test sees the kernels 600M compiles.
    del model.encode_packed, model.decode_step  # the checks above wait for the GPU, which a capture forbids
    graphed = Generator.build(model)
    graphed.run([Request(sentence(32, rng), [2, 256047], options)])
    graphed.run([Request(sentence(n, rng), [2, 256047], options) for n in range(10, 60, 5)])


# (K, N) of the projections of 600M, 1.3B and 3.3B, and 600M's cross K/V of all layers at once
LAYERS = [(1024, 1024), (1024, 3072), (1024, 4096), (4096, 1024), (1024, 8192), (8192, 1024), (2048, 2048),
          (2048, 6144), (2048, 8192), (8192, 2048), (1024, 24576)]


@pytest.mark.parametrize("M", [4, 16, 48])
def test_fused_linear_at_the_models_shapes_is_within_twice_the_reference_s_error(M):
    """The plans the profile gives fused_linear (smaller tiles, fewer stages, splits) compute the
    same function in the card's half precision: the flash-attention rule against float64."""
    from dragoman.kernels.fused_linear import fused_linear_ref, fused_linear_triton

    dtype, g = getattr(torch, HALF), torch.Generator(device="cuda").manual_seed(M)
    for K, N in LAYERS:
        x = torch.randn(M, K, device="cuda", generator=g).to(dtype)
        weight = (torch.randn(N, K, device="cuda", generator=g) / K**0.5).to(dtype)
        bias = torch.randn(N, device="cuda", generator=g).to(dtype)
        truth = fused_linear_ref(x.double(), weight.double(), bias.double(), True)
        kernel_error = (fused_linear_triton(x, weight, bias, True).double() - truth).abs().max()
        reference_error = (fused_linear_ref(x, weight, bias, True).double() - truth).abs().max()
        assert kernel_error <= 2 * reference_error, f"{M} x {K} -> {N}: {kernel_error:.3g} against {reference_error:.3g}"


def test_no_compiled_kernel_needs_more_shared_memory_than_the_profile_has():
    """Run last: every kernel variant the tests above compiled, against the card's limit."""
    limit = gpu_profile(torch.device("cuda", 0)).shared_memory
    print(report(limit))
    assert not over_limit(limit), report(limit)


def test_a_first_launch_translates_while_its_kernels_are_built_apart(make_translator, translator, tmp_path,
                                                                     monkeypatch):
    """On a first launch (no marker) the references translate, uncaptured, while another process
    compiles the kernels; once it is done the kernels and graphs serve, and a later launch builds
    nothing. float32: the references give the CPU's tokens too."""
    from dragoman.engine import kernel_build

    monkeypatch.setattr(kernel_build, "triton_cache_dir", lambda: tmp_path)
    gpu = make_translator(device="cuda", dtype="float32", build_kernels_apart=True)
    assert gpu.kernels_building() and kernels.building()
    options = dict(num_beams=4, max_length=40)
    expected = translator.translate(TEXTS, "eng_Latn", "fra_Latn", translator.default_options(**options))
    assert gpu.translate(TEXTS, "eng_Latn", "fra_Latn", gpu.default_options(**options)) == expected
    assert not gpu.generator.runner.graphs.graphs or not gpu.kernels_building()  # none captured while building
    gpu.wait_for_kernels()
    assert gpu.kernel_build.succeeded and not kernels.building()
    assert list(tmp_path.glob("dragoman-kernels-*.built"))
    gpu.warm_up(**options)
    assert gpu.generator.runner.graphs.graphs, "graphs captured once the kernels are ready"
    assert gpu.translate(TEXTS, "eng_Latn", "fra_Latn", gpu.default_options(**options)) == expected
    assert make_translator(device="cuda", dtype="float32", build_kernels_apart=True).kernel_build is None
