"""Encoders of observations that are partly images, shared by every agent that takes one.

The contract with envs: an env may declare `image_shape = (H, W, C)`; the first H*W*C entries of
its flat observation are then an image (row-major, channels last) and the rest are other
features (JaxUED's maze: its egocentric view, then the direction the agent faces). The conv
encoder reshapes the image, applies its conv layers (stride 1, no padding, ReLU after each),
flattens them, appends the other features (as they are, or through a linear layer, as JaxUED's
maze_plr.py embeds the direction), and hands the result to the agent's MLP or recurrent cell.

Agents declare it as a static config field (`agent.encoder`, default null: the plain MLP, whose
program is unchanged). `build_loop` refuses an encoder on an env without `image_shape`, in one
line, before anything compiles.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from ajax_tune.agents.networks import Dense, dense
from ajax_tune.errors import ConfigError
from ajax_tune.fields import check_keys, config_section, static

KINDS = ("conv",)


@config_section("agent.encoder")
class EncoderConfig:
    """`agent.encoder`: what reads an env's image before the MLP (or the recurrent cell)."""

    kind: str = static("conv", choices=KINDS, doc="conv: conv layers over the env's image (its `image_shape`)")
    channels: tuple[int, ...] = static((16,), ge=1, doc="output channels of each conv layer (stride 1, no padding, ReLU)")
    kernel: int = static(3, ge=1, doc="the side of each layer's square kernel")
    embed_rest: int = static(
        0, ge=0, doc="0: the features after the image are appended as they are; N: through a linear layer of N first"
    )

    @classmethod
    def parse(cls, value) -> EncoderConfig | None:
        if value is None or isinstance(value, cls):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError(
                f"agent.encoder must be a mapping such as {{kind: conv, channels: [16], kernel: 3}} or null, got {value!r}"
            )
        check_keys(value, [f.name for f in dataclasses.fields(cls)], "agent.encoder.")
        return cls(**value)

    def check(self, image_shape, observation_size: int, env_name: str) -> None:
        """One line where this encoder cannot read the env's observations."""
        if image_shape is None:
            raise ConfigError(
                f"agent.encoder: {self.kind} reads an image, and env {env_name!r} declares none (its image_shape is None)"
            )
        height, width, _ = image_shape
        if math.prod(image_shape) > observation_size:
            raise ConfigError(
                f"agent.encoder: env {env_name!r} declares image_shape {tuple(image_shape)}, more values than its "
                f"observation has ({observation_size})"
            )
        shrink = len(self.channels) * (self.kernel - 1)
        if min(height, width) - shrink < 1:
            raise ConfigError(
                f"agent.encoder: {len(self.channels)} conv layer(s) of kernel {self.kernel} shrink the "
                f"{height} x {width} image of env {env_name!r} to nothing; use fewer layers or a smaller kernel"
            )


class Conv(nn.Module):
    """`nn.Conv` with stride 1 and no padding (the same parameters, names and initialisation),
    computed as one matrix product: each output pixel's `kernel x kernel x C` patch, cut by
    slicing, times the kernel flattened, through `networks.dense`. The same sums as a
    convolution; XLA's CPU backend computes the weight gradient of its convolution over a
    recurrent update's many small images far more slowly than that of a product (the maze
    update in docs/benchmarks.md)."""

    features: int
    kernel_size: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        k, channels = self.kernel_size, x.shape[-1]
        kernel = self.param("kernel", nn.initializers.lecun_normal(), (k, k, channels, self.features), jnp.float32)
        bias = self.param("bias", nn.initializers.zeros_init(), (self.features,), jnp.float32)
        rows, cols = x.shape[-3] - k + 1, x.shape[-2] - k + 1
        patches = jnp.concatenate([x[..., i : i + rows, j : j + cols, :] for i in range(k) for j in range(k)], axis=-1)
        return dense(patches, kernel.reshape(k * k * channels, self.features), bias)


class ConvEncoder(nn.Module):
    """Conv layers over the image part of flat observations of any leading shape."""

    image_shape: tuple[int, int, int]
    channels: tuple[int, ...]
    kernel: int = 3
    embed_rest: int = 0

    @nn.compact
    def __call__(self, obs: jax.Array) -> jax.Array:
        size = int(np.prod(self.image_shape))
        lead = obs.shape[:-1]
        x = obs[..., :size].reshape(-1, *self.image_shape)
        for channels in self.channels:
            x = nn.relu(Conv(channels, self.kernel)(x))
        features = x.reshape(*lead, -1)
        rest = obs[..., size:]
        if rest.shape[-1] == 0:
            return features
        if self.embed_rest:
            rest = Dense(self.embed_rest, kernel_init=nn.initializers.orthogonal(np.sqrt(2.0)))(rest)
        return jnp.concatenate([features, rest], axis=-1)


class Encoded(nn.Module):
    """`head(encoder(obs))`: an agent's network with an encoder in front."""

    encoder: nn.Module
    head: nn.Module

    def __call__(self, obs: jax.Array) -> jax.Array:
        return self.head(self.encoder(obs))


def make_encoder(config: EncoderConfig | None, image_shape) -> ConvEncoder | None:
    """The encoder a config asks for (None: none). The image's shape is the env's."""
    if config is None:
        return None
    if image_shape is None:
        raise ConfigError(f"agent.encoder: {config.kind} needs the env's image_shape")
    return ConvEncoder(tuple(int(n) for n in image_shape), tuple(config.channels), config.kernel, config.embed_rest)


def encoded(config: EncoderConfig | None, image_shape, head: nn.Module) -> nn.Module:
    """`head` with the configured encoder in front, or `head` itself without one."""
    encoder = make_encoder(config, image_shape)
    return head if encoder is None else Encoded(encoder, head)
