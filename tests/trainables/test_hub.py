"""Where the hub's host does not resolve, every load goes to the cache at once (trainables.hub):
the libraries would otherwise retry for about 23 s per dataset and model before giving up."""

import huggingface_hub.constants
import pytest
import transformers

from study.spec import load_study
from trainables import hub
from trainables.errors import ConfigError, ModelError
from trainables.model.tagger import load_encoder

HUB_MODEL = "no-such-user/no-such-model"


@pytest.fixture
def config_loads(monkeypatch) -> list[bool]:
    """HF_HUB_OFFLINE as each `AutoConfig.from_pretrained` saw it."""
    seen: list[bool] = []
    real = transformers.AutoConfig.from_pretrained

    def load(*args, **kwargs):
        seen.append(huggingface_hub.constants.HF_HUB_OFFLINE)
        return real(*args, **kwargs)

    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", load)
    return seen


def said(host: str) -> str:
    return f"the hub's host {host} does not resolve here, so only its cache was read"


def test_a_trial_loads_a_hub_model_from_the_cache_only(hub_unresolved, config_loads):
    with pytest.raises(ModelError) as err:
        load_encoder(HUB_MODEL)
    assert config_loads == [True]  # offline while it loaded
    assert huggingface_hub.constants.HF_HUB_OFFLINE is False  # and as it was afterwards
    message = str(err.value)
    assert message.startswith(f"cannot load the config of model {HUB_MODEL!r}: ")
    assert said(hub_unresolved) in message and "\n" not in message


def test_a_study_that_downloads_its_model_config_reads_the_cache_only(hub_unresolved, monkeypatch):
    import huggingface_hub

    seen = []
    real = huggingface_hub.hf_hub_download

    def download(*args, **kwargs):
        seen.append(huggingface_hub.constants.HF_HUB_OFFLINE)
        return real(*args, **kwargs)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    with pytest.raises(ConfigError) as err:
        load_study("ner_depth", overrides=[f"model={HUB_MODEL}"], download=True)
    assert seen == [True]
    message = str(err.value)
    assert f"cannot read the config of {HUB_MODEL!r}: " in message
    assert said(hub_unresolved) in message and "\n" not in message


def test_a_proxy_or_a_folder_name_keeps_the_hub_as_it_is(hub_unresolved, monkeypatch):
    assert hub.unreachable_host() == hub_unresolved
    # behind a proxy the name is not looked up here: the proxy may reach what DNS cannot
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    assert hub.unreachable_host() is None
    monkeypatch.setenv("NO_PROXY", hub_unresolved)  # unless the hub is not asked through it
    assert hub.unreachable_host() == hub_unresolved
    # a name only a folder can have asks no hub
    for name in ("./model", "/abs/model", "~/model", "a/b/c", ".."):
        with hub.cache_only_if_unreachable(name) as host:
            assert host is None and huggingface_hub.constants.HF_HUB_OFFLINE is False
    with hub.cache_only_if_unreachable("owner/model") as host:
        assert host == hub_unresolved and huggingface_hub.constants.HF_HUB_OFFLINE is True
    assert huggingface_hub.constants.HF_HUB_OFFLINE is False


def test_a_hub_already_offline_is_not_looked_up(hub_unresolved, monkeypatch):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    assert hub.unreachable_host() is None
    assert hub._resolves.cache_info().currsize == 0
