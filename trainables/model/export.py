"""A trained tagger as a Hugging Face folder that `AutoModelForTokenClassification` reloads.

The tagger is built by hand (trainables/model/tagger.py) so every arm's surgery is applied
alike; its encoder is already the architecture the trial evaluated (a depth cut rewrites the
config's layer count, trainables/model/surgery.py), and its head is one linear layer over the
last hidden state, which is what a family's `...ForTokenClassification` computes in eval mode
(dropout is off). A family whose token-classification model adds more than that (ModernBERT's
dense + norm before the classifier) cannot say the same function, and is refused.
"""

from __future__ import annotations

import copy
from pathlib import Path

from transformers import AutoModelForTokenClassification, PreTrainedModel

from trainables.data.labels import LabelMap
from trainables.errors import ModelError
from trainables.model.quiet import quiet_transformers
from trainables.model.tagger import Tagger

CLASSIFIER = "classifier"  # the head's name in every supported family's token classifier


def token_classifier(tagger: Tagger, label_map: LabelMap) -> PreTrainedModel:
    """The family's token-classification model holding the tagger's encoder and head, on the
    CPU in the encoder's dtype, its config naming the labels (id2label, label2id)."""
    config = copy.deepcopy(tagger.encoder.config)
    config.num_labels = len(label_map.labels)
    config.id2label = dict(enumerate(label_map.labels))
    config.label2id = label_map.to_dict()
    config.architectures = None  # save_pretrained names the class it saves
    model = AutoModelForTokenClassification.from_config(config)
    prefix = model.base_model_prefix
    other = [
        name
        for name, _ in model.named_parameters()
        if not name.startswith((f"{prefix}.", f"{CLASSIFIER}."))
    ]
    head = getattr(model, CLASSIFIER, None)
    if other or head is None or head.weight.shape != tagger.head.weight.shape:
        raise ModelError(
            f"a {config.model_type} tagger cannot be saved as AutoModelForTokenClassification: "
            f"its token classifier is not one linear layer over the encoder ({', '.join(other)})"
        )
    model.base_model.load_state_dict(tagger.encoder.state_dict())
    head.load_state_dict(tagger.head.state_dict())
    return model.to(tagger.head.weight.dtype).eval()


def save_hf_folder(tagger: Tagger, tokenizer, label_map: LabelMap, folder: str | Path) -> None:
    """`save_pretrained` of the model, its tokenizer and its label map into `folder`."""
    with quiet_transformers():  # no progress bar per trial in the study's output
        token_classifier(tagger, label_map).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
