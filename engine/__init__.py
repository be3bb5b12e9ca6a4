"""The NLLB engine: checkpoint loading, tokenizer, model, paged KV cache, decoding. No Qt here."""
