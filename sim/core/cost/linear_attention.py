"""One Gated DeltaNet (linear-attention) layer's kernels on one device, priced: the causal convolution and the
delta rule, in prefill (chunked) and in decode (one token through the per-sequence state).

Measured kernels where the pool's grid profile holds them (`gdn_prefill`, `gdn_decode`: AIConfigurator's
`gdn_perf` tables), their roofline (`calibrate.ops.gdn_*_work`, efficiency `linear_attn`) otherwise; which op came
from where is recorded on the pricer, with the reason for each fallback. Neither phase depends on the cached
context: a sequence's history is its fixed-size state. docs/cost-model.md, "Linear-attention layers".
"""
from __future__ import annotations

from calibrate import ops
from calibrate.aic.grid import GDN_CONV_TOKENS
from calibrate.aic.grid_model import prefill_shape
from inferplan.config.specs import LinearAttentionSpec
from sim.core.cost.pricer import OpPricer

GDN_PREFILL_OPS: tuple[str, ...] = ("gdn_conv_prefill", "gdn_chunk_prefill")
GDN_DECODE_OPS: tuple[str, ...] = ("gdn_conv_decode", "gdn_recurrent_decode")


class LinearAttentionPricer:
    """The kernels of one linear-attention layer of `la` on one device of a `tp`-way shard (TP shards the heads,
    at least one per device, and the convolution's channels)."""

    def __init__(self, la: LinearAttentionSpec, tp: int, pricer: OpPricer) -> None:
        self.la, self.pricer = la, pricer
        self.v_heads = int(round(max(1.0, la.num_value_heads / tp)))
        self.k_heads = int(round(max(1.0, la.num_key_heads / tp)))
        self.channels = la.conv_channels / tp
        self.state_bytes = ops.check_dtype(la.state_dtype)["act_bytes"]
        self.measured: dict[str, bool] = {}  # GDN op -> priced from the grid's measured kernels
        self._coverage()

    def _coverage(self) -> None:
        """Which kernels the grid prices (the tables measure key and value heads of equal dims, a convolution of
        `GDN_CONV_TOKENS` taps, bf16 activations); the rest fall back, with their reason."""
        la, pricer = self.la, self.pricer
        if pricer.grid is None:
            return
        for op in GDN_PREFILL_OPS + GDN_DECODE_OPS:
            if la.key_head_dim != la.value_head_dim:
                pricer.fall_back(op, "bf16", f"key head dim {la.key_head_dim} != value head dim "
                                 f"{la.value_head_dim}: the GDN tables measure equal ones")
            elif "conv" in op and la.conv_kernel_tokens != GDN_CONV_TOKENS:
                pricer.fall_back(op, "bf16", f"a {la.conv_kernel_tokens}-tap convolution: the GDN tables measure "
                                 f"{GDN_CONV_TOKENS} taps")
            else:
                self.measured[op] = pricer.measures(op, "bf16", dtype="bf16")
        if not all(self.measured.get(op, False) for op in GDN_PREFILL_OPS + GDN_DECODE_OPS):
            pricer.fall_back("linear_attn", "bf16", "the roofline of the Gated DeltaNet kernels the grid does not "
                             "price (their gdn_* entries say why)")

    def prefill_s(self, prefill_tokens: float, q_sq: float) -> float:
        """Prefill of chunks with `prefill_tokens` new tokens and `q_sq` = sum q (q + 1) / 2: the convolution and
        the chunked delta rule. Their cost follows the tokens and the sequences (each chunk starts from its
        sequence's state: the cached context costs nothing), so the chunks are priced as equal prompts of the same
        tokens and `q_sq` (`prefill_shape` without the cached context)."""
        la, p = self.la, self.pricer
        batch, seq = prefill_shape(prefill_tokens, q_sq, 0.0)
        t = 0.0
        for op in GDN_PREFILL_OPS:
            if self.measured.get(op, False):
                t += p.gdn_s(op, batch, seq, self.v_heads, self.k_heads, la.key_head_dim)
            elif op == "gdn_conv_prefill":
                t += p.time_s("linear_attn", "bf16", *ops.gdn_conv_work(prefill_tokens, batch, self.channels,
                                                                        la.conv_kernel_tokens))
            else:
                t += p.time_s("linear_attn", "bf16", *ops.gdn_chunk_work(
                    prefill_tokens, batch, self.v_heads, self.k_heads, la.key_head_dim, la.value_head_dim,
                    self.state_bytes))
        return t

    def decode_s(self, tokens: float) -> float:
        """Decode of `tokens` query tokens (a sequence's, plus its drafts when verifying), each through the
        convolution state and the recurrent state, read and written once per token whatever the context."""
        la, p = self.la, self.pricer
        t = 0.0
        for op in GDN_DECODE_OPS:
            if self.measured.get(op, False):
                t += p.gdn_s(op, tokens, 0.0, self.v_heads, self.k_heads, la.key_head_dim)
            elif op == "gdn_conv_decode":
                t += p.time_s("linear_attn", "bf16", *ops.gdn_conv_work(tokens, tokens, self.channels,
                                                                        la.conv_kernel_tokens))
            else:
                t += p.time_s("linear_attn", "bf16", *ops.gdn_recurrent_work(
                    tokens, self.v_heads, self.k_heads, la.key_head_dim, la.value_head_dim, self.state_bytes))
        return t
