# Library zoo: a healthy tiny Hugging Face ViT classifier (random init) on the channels-last images of
# silent_contract_images.py; pixel_values are moved to channels first with permute.
import transformers

transformers.logging.set_verbosity_error()


def get_model(*, epoch, step, **_kwargs):
    config = transformers.ViTConfig(
        image_size=8,
        patch_size=4,
        num_channels=3,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        num_labels=4,
    )
    return transformers.ViTForImageClassification(config)


def pixel_values_of(images):
    return images.permute(0, 3, 1, 2)


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    out = model(pixel_values=pixel_values_of(extern_data["data"]), labels=extern_data["classes"])
    run_ctx.mark_as_loss(name="ce", loss=out.loss)
