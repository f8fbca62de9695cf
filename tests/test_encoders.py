"""`agent.encoder`: conv layers over the image an env declares (`image_shape`), the same module in
front of PPO's MLPs, recurrent PPO's cell and DQN's Q-network; refused where there is no image."""

import flax.linen as nn
import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax_tune.agents import DQN, DQNConfig, PPOConfig, make_agent
from ajax_tune.agents.encoders import ConvEncoder, EncoderConfig
from ajax_tune.config import Config
from ajax_tune.errors import ConfigError
from tests.support.helpers import assert_refused_before_compiling

IMAGE = (5, 5, 3)
OBS = gymnasium.spaces.Box(0.0, 1.0, (5 * 5 * 3 + 4,), np.float32)  # JaxUED's maze: its view, then a direction
ACTIONS = gymnasium.spaces.Discrete(7)


def param_count(tree) -> int:
    return sum(int(np.prod(x.shape)) for x in jax.tree.leaves(tree))


@pytest.mark.parametrize(
    "channels, kernel, embed_rest, features",
    [((16,), 3, 0, 3 * 3 * 16 + 4), ((16,), 3, 5, 3 * 3 * 16 + 5), ((8, 4), 2, 0, 3 * 3 * 4 + 4), ((2,), 5, 0, 2 + 4)],
)
def test_conv_encoder_shapes(channels, kernel, embed_rest, features):
    encoder = ConvEncoder(IMAGE, channels, kernel, embed_rest)
    obs = jnp.zeros((7, 3, OBS.shape[0]))  # any leading shape: [T, B, D] in a recurrent update
    params = encoder.init(jax.random.PRNGKey(0), obs)
    assert encoder.apply(params, obs).shape == (7, 3, features)
    assert encoder.apply(params, obs[0, 0]).shape == (features,)


def test_the_encoder_reads_the_image_row_major_channels_last():
    """A 1x1 kernel with one channel that sums the channels: the output at (y, x) is the sum
    over c of obs[(y * W + x) * C + c], so the image is laid out as [H, W, C]."""
    encoder = ConvEncoder((2, 3, 2), (1,), 1)
    obs = jnp.arange(12.0)
    params = {"params": {"Conv_0": {"kernel": jnp.ones((1, 1, 2, 1)), "bias": jnp.zeros(1)}}}
    np.testing.assert_array_equal(encoder.apply(params, obs), np.arange(12.0).reshape(2, 3, 2).sum(-1).reshape(-1))


@pytest.mark.parametrize("channels, kernel", [((16,), 3), ((8, 4), 2), ((3,), 1), ((2,), 5)])
def test_the_conv_is_flaxs_nn_conv(channels, kernel):
    """The encoder's conv, one product over each pixel's patch, against flax's `nn.Conv` (stride 1,
    VALID) on the same parameters: the same parameter tree and initial values, the same outputs
    and the same gradients, to float32 rounding."""

    class FlaxConvs(nn.Module):
        @nn.compact
        def __call__(self, x):
            for c in channels:
                x = nn.relu(nn.Conv(c, (kernel, kernel), padding="VALID")(x))
            return x.reshape(*x.shape[:-3], -1)

    ours = ConvEncoder(IMAGE, channels, kernel)
    obs = jax.random.uniform(jax.random.PRNGKey(1), (6, 2, OBS.shape[0]))
    image = obs[..., : np.prod(IMAGE)].reshape(-1, *IMAGE)
    params = ours.init(jax.random.PRNGKey(0), obs)
    reference = FlaxConvs().init(jax.random.PRNGKey(0), image)
    assert jax.tree.structure(params) == jax.tree.structure(reference)
    jax.tree.map(np.testing.assert_array_equal, params, reference)

    def ours_out(p):
        return ours.apply(p, obs)[..., : -(OBS.shape[0] - np.prod(IMAGE))].reshape(12, -1)

    def flax_out(p):
        return FlaxConvs().apply(p, image)

    np.testing.assert_allclose(ours_out(params), flax_out(params), rtol=1e-5, atol=1e-6)
    weights = jax.random.normal(jax.random.PRNGKey(2), flax_out(params).shape)
    grads = [jax.grad(lambda p, f=f: jnp.sum(jnp.sin(f(p)) * weights))(params) for f in (ours_out, flax_out)]
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5), *grads)


def test_ppo_dqn_and_recurrent_ppo_take_the_encoder():
    conv = {"kind": "conv", "channels": [16], "kernel": 3}
    ppo = make_agent("ppo", PPOConfig(num_envs=4, encoder=conv), OBS, ACTIONS, image_shape=IMAGE)
    state = ppo.init(jax.random.PRNGKey(0))
    assert state.params["policy"]["params"]["encoder"]["Conv_0"]["kernel"].shape == (3, 3, 3, 16)
    assert state.params["value"]["params"]["head"]["Dense_0"]["kernel"].shape == (148, 64)
    action, _ = ppo.act(state, jnp.zeros((4, OBS.shape[0])), jax.random.PRNGKey(1))
    assert action.shape == (4,)

    dqn = DQN(DQNConfig(num_envs=4, encoder=conv), OBS, ACTIONS, image_shape=IMAGE)
    q_state = dqn.init(jax.random.PRNGKey(0))
    assert q_state.params["params"]["encoder"]["Conv_0"]["kernel"].shape == (3, 3, 3, 16)
    greedy, _ = dqn.act(q_state, jnp.zeros((4, OBS.shape[0])), jax.random.PRNGKey(1), deterministic=True)
    assert greedy.shape == (4,)


def test_recurrent_ppo_with_maze_plrs_settings_is_maze_plrs_network():
    """Conv 16 3x3 over the view, the direction embedded in 5, an LSTM of 256, heads of 32: JaxUED's
    maze_plr.py ActorCritic, whose parameters number 432,929."""
    config = PPOConfig(
        num_envs=4,
        num_minibatches=1,
        hidden_sizes=(32,),
        activation="relu",
        recurrent={"cell": "lstm", "size": 256},
        encoder={"kind": "conv", "channels": [16], "kernel": 3, "embed_rest": 5},
    )
    agent = make_agent("ppo", config, OBS, ACTIONS, image_shape=IMAGE)
    state = agent.init(jax.random.PRNGKey(0))
    assert param_count(state.params) == 432_929
    trunk = state.params["trunk"]["params"]
    assert trunk["OptimizedLSTMCell_0"]["ii"]["kernel"].shape == (3 * 3 * 16 + 5, 256)
    carry = agent.init_carry(4)
    action, extras, carry = agent.act(state, jnp.zeros((4, OBS.shape[0])), jax.random.PRNGKey(1), carry=carry)
    assert action.shape == (4,) and carry[0].shape == (4, 256)


def test_encoder_configs_parse_and_round_trip():
    config = Config.from_dict(
        {"env": {"name": "cartpole"}, "agent": {"name": "ppo", "encoder": {"kind": "conv", "channels": [8, 8]}}}
    )
    assert config.agent.encoder == EncoderConfig(kind="conv", channels=(8, 8), kernel=3)
    assert Config.from_dict(config.to_dict()).agent.encoder == config.agent.encoder
    assert PPOConfig().encoder is None and DQNConfig().encoder is None
    with pytest.raises(ConfigError, match="unknown key agent.encoder.'kernal'; did you mean agent.encoder.'kernel'?"):
        PPOConfig(encoder={"kind": "conv", "kernal": 3})
    with pytest.raises(ConfigError, match="agent.encoder.kind must be one of \\['conv'\\]"):
        PPOConfig(encoder={"kind": "resnet"})
    with pytest.raises(ConfigError, match="agent.encoder.channels must be >= 1"):
        DQNConfig(encoder={"channels": [0]})


def test_an_encoder_on_an_env_without_an_image_is_refused_before_compiling():
    config = {"env": {"name": "cartpole"}, "agent": {"name": "ppo", "encoder": {"kind": "conv"}}}
    assert_refused_before_compiling(config, "agent.encoder: conv reads an image, and env 'cartpole' declares none")
