# Library zoo, over lib_gpt2.py: the same causal language model task with a tiny Hugging Face CodeGen
# (CodeGenForCausalLM, random init), whose attention keeps its rotary position table in a plain tensor attribute and
# moves it to the device of the positions on its first call (a library's own device handling).
import transformers


def get_model(*, epoch, step, **_kwargs):
    config = transformers.CodeGenConfig(
        vocab_size=32,
        n_positions=16,
        n_ctx=16,
        n_embd=64,
        n_layer=2,
        n_head=4,
        rotary_dim=8,
        bos_token_id=1,
        eos_token_id=2,
    )
    return transformers.CodeGenForCausalLM(config)
