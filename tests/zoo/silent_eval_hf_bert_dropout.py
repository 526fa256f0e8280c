# Bug: a classification head on a Hugging Face BertModel with a functional dropout on the pooled output.
import transformers
from torch import nn


class BertClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        config = transformers.BertConfig(
            vocab_size=32,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=16,
        )
        self.bert = transformers.BertModel(config)
        self.head = nn.Linear(32, 2)

    def forward(self, input_ids, attention_mask):
        pooled = self.bert(input_ids=input_ids, attention_mask=attention_mask).pooler_output
        return self.head(nn.functional.dropout(pooled, p=0.1))


def get_model(*, epoch, step, **_kwargs):
    return BertClassifier()


def train_step(*, model, extern_data, run_ctx, **_kwargs):
    tokens, lengths = extern_data["data"], extern_data["data:seq_len"]
    mask = torch.arange(tokens.shape[1], device=tokens.device)[None, :] < lengths.to(tokens.device)[:, None]
    logits = model(tokens, mask.long())
    run_ctx.mark_as_loss(name="ce", loss=loss_of(logits, extern_data["classes"]))
