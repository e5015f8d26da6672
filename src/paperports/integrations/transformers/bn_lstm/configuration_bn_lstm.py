"""Configuration of the BN-LSTM model family (Cooijmans et al. 2016) for transformers."""

from __future__ import annotations

from typing import Any

from transformers import PreTrainedConfig

from paperports._checks import check_bool, check_float, check_int, check_probability

__all__ = ["BnLstmConfig"]


class BnLstmConfig(PreTrainedConfig):
    r"""Configuration of :class:`BnLstmModel` and its heads.

    Args:
        vocab_size (`int`, *optional*, defaults to 256):
            Tokens of the embedding and the language-model head (256: bytes/characters).
        input_size (`int`, *optional*):
            Features per time step entering the BN-LSTM: the embedding size for
            `input_ids`, or the features of `inputs_embeds` (for example 1 for pixel
            sequences). Defaults to `hidden_size`.
        hidden_size (`int`, *optional*, defaults to 256):
            Size of the hidden and cell states.
        num_hidden_layers (`int`, *optional*, defaults to 1):
            Stacked BN-LSTM layers (`num_layers`, `nn.LSTM`'s name, is accepted too, and
            `config.num_layers` reads it).
        bidirectional (`bool`, *optional*, defaults to False):
            Run each layer in both directions (as `nn.LSTM`'s `bidirectional`): the hidden
            states have `2 * hidden_size` features, and the pooled output joins the forward
            direction's last state and the reverse direction's. For encoders (sequence
            classification); a causal language model refuses it, since it would read ahead.
        dropout (`float`, *optional*, defaults to 0.0):
            Dropout between layers (as `nn.LSTM`'s `dropout`).
        t_max (`int`, *optional*, defaults to 1000):
            Time steps that keep their own batch statistics; later steps reuse the last.
            (Named `t_max`, not `max_length`, which transformers reserves for generation.)
        statistics_steps (`int`, *optional*, defaults to 1):
            Time steps whose running statistics the model's buffers hold when it is built
            (1 to `t_max`). Training grows them to the steps it reaches, so a new model
            holds step 0's; `save_pretrained` records how many the saved model holds, so
            that `from_pretrained` builds buffers of that size. A saved configuration from
            before this setting existed held `t_max` steps, and loads as such.
        gamma_init (`float`, *optional*, defaults to 0.1):
            Initial batch-norm scale; the paper's 0.1, since 1.0 hampers gradient flow.
        forget_bias (`float`, *optional*, defaults to 1.0):
            Initial forget-gate bias.
        bn_momentum (`float`, *optional*, defaults to 0.1):
            Update rate of the running statistics.
        bn_eps (`float`, *optional*, defaults to 1e-5):
            Added to the batch variances.
        random_t_max (`float`, *optional*, defaults to 0.0):
            The fraction of training batches normalised, from a random step of their second
            half on, with the statistics of the step before, as evaluation past `t_max`
            normalises (`BNLSTM`'s `random_t_max`): it trains the model for sequences longer
            than the trained ones. 0 is the paper's training.
        classifier_dropout (`float`, *optional*, defaults to 0.0):
            Dropout before the sequence-classification head (`None`: 0.0).
        initializer_range (`float`, *optional*, defaults to 0.02):
            Standard deviation of the embedding and head initialisation.

    Example:

    ```python
    >>> from paperports.integrations.transformers import BnLstmConfig, BnLstmForCausalLM
    >>> model = BnLstmForCausalLM(BnLstmConfig(vocab_size=128, hidden_size=64))
    ```
    """

    model_type = "bn_lstm"
    attribute_map = {"num_layers": "num_hidden_layers"}  # noqa: RUF012 (transformers' form)

    def __init__(
        self,
        vocab_size: int = 256,
        input_size: int | None = None,
        hidden_size: int = 256,
        num_hidden_layers: int = 1,
        bidirectional: bool = False,
        dropout: float = 0.0,
        t_max: int = 1000,
        statistics_steps: int = 1,
        gamma_init: float = 0.1,
        forget_bias: float = 1.0,
        bn_momentum: float = 0.1,
        bn_eps: float = 1e-5,
        random_t_max: float = 0.0,
        classifier_dropout: float | None = 0.0,
        initializer_range: float = 0.02,
        **kwargs: Any,
    ) -> None:
        who = "BnLstmConfig"
        if "num_layers" in kwargs:  # nn.LSTM's name for it
            num_layers = kwargs.pop("num_layers")
            if num_hidden_layers not in (1, num_layers):
                raise ValueError(
                    f"{who}: num_layers={num_layers!r} and num_hidden_layers="
                    f"{num_hidden_layers!r} name the same setting; pass one of them"
                )
            num_hidden_layers = num_layers
        for name, value in [
            ("vocab_size", vocab_size),
            ("hidden_size", hidden_size),
            ("num_hidden_layers", num_hidden_layers),
            ("t_max", t_max),
        ]:
            check_int(name, value, minimum=1, who=who)
        check_int("statistics_steps", statistics_steps, minimum=1, who=who)
        if statistics_steps > t_max:
            raise ValueError(
                f"{who}: statistics_steps={statistics_steps} is more than t_max={t_max}: the "
                "statistics of at most t_max steps are kept"
            )
        if input_size is not None:
            check_int("input_size", input_size, minimum=1, who=who)
        bidirectional = check_bool("bidirectional", bidirectional, who=who)
        check_probability("dropout", dropout, who=who)
        if classifier_dropout is None:
            classifier_dropout = 0.0
        check_probability("classifier_dropout", classifier_dropout, who=who)
        check_float("gamma_init", gamma_init, who=who)
        check_float("forget_bias", forget_bias, who=who)
        check_float("bn_momentum", bn_momentum, minimum=0.0, maximum=1.0, who=who)
        check_float("bn_eps", bn_eps, minimum=0.0, open_low=True, who=who)
        check_probability("random_t_max", random_t_max, who=who)
        check_float("initializer_range", initializer_range, minimum=0.0, who=who)
        self.vocab_size = vocab_size
        self.input_size = input_size if input_size is not None else hidden_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        self.bidirectional = bidirectional
        self.dropout = dropout
        self.t_max = t_max
        self.statistics_steps = statistics_steps
        self.gamma_init = gamma_init
        self.forget_bias = forget_bias
        self.bn_momentum = bn_momentum
        self.bn_eps = bn_eps
        self.random_t_max = random_t_max
        self.classifier_dropout = classifier_dropout
        self.initializer_range = initializer_range
        super().__init__(**kwargs)

    @classmethod
    def from_dict(cls, config_dict: dict[str, Any], **kwargs: Any) -> Any:
        """As transformers' ``from_dict``; a configuration saved before `statistics_steps`
        existed (one with a `transformers_version` and no `statistics_steps`) belongs to
        a model that held the statistics of `t_max` steps, and gets that many."""
        if "statistics_steps" not in config_dict and "transformers_version" in config_dict:
            config_dict = {**config_dict, "statistics_steps": config_dict.get("t_max", 1000)}
        return super().from_dict(config_dict, **kwargs)
