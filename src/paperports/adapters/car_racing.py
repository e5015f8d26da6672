r"""CarRacing in the paper's latent space: frames encoded by a VAE trained on our own frames.

The paper's second experiment (Freeman, Metz, Ha 2019, after Ha & Schmidhuber's World
Models) runs observational dropout on gymnasium's ``CarRacing`` in the latent space of a
variational autoencoder: each 96 x 96 frame, resized to 64 x 64, is encoded to a 16-d
latent :math:`z`, and the agent's world model predicts :math:`\Delta z`. No pretrained
weights are downloaded: :func:`collect_frames` drives the car with random actions biased
forward, and :func:`train_vae` fits :class:`FrameVAE` on those frames, minimising

.. math::
    \mathcal L = \lVert x - \hat x \rVert^2 + \max\Big(\tfrac12 \sum_i
        \big(\mu_i^2 + \sigma_i^2 - \log\sigma_i^2 - 1\big),\ \tau\Big)

(World Models' loss: a summed squared error and a KL term that stops pulling below the
tolerance :math:`\tau = 0.5 \cdot 16`). :class:`LatentObservation` then hands the policy
:math:`\mu(x)`, the encoder's mean, so that ``ObservationalDropoutWrapper`` masks a flat
16-d observation as on the swing-up.

Needs the ``carracing`` extra (Box2D and pygame, wheels from the registry).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from paperports._checks import check_float, check_int
from paperports._imports import require

# pygame (which CarRacing draws its frames with) is checked by gymnasium when the
# environment is made; importing it here would print its banner
require("carracing", "gymnasium", "Box2D", feature="paperports.adapters.car_racing")

import gymnasium as gym  # noqa: E402
from gymnasium import spaces  # noqa: E402

__all__ = [
    "ENV_ID",
    "LATENT_SIZE",
    "FrameVAE",
    "LatentObservation",
    "collect_frames",
    "preprocess_frames",
    "train_vae",
]

ENV_ID = "CarRacing-v3"
LATENT_SIZE = 16  # the paper's z
FRAME = 64  # frames are resized to 64 x 64, as World Models'


def preprocess_frames(frames: np.ndarray | Tensor) -> Tensor:
    """``(N, 96, 96, 3)`` uint8 frames (or one frame) to ``(N, 3, 64, 64)`` floats in
    ``[0, 1]``, bilinearly resized."""
    x = torch.as_tensor(np.asarray(frames))
    if x.dim() == 3:
        x = x[None]
    if x.dim() != 4 or x.shape[-1] != 3 or x.dtype != torch.uint8:
        raise ValueError(
            f"frames must be uint8 RGB images (N, H, W, 3) or (H, W, 3), got "
            f"{tuple(x.shape)} {x.dtype}"
        )
    x = x.permute(0, 3, 1, 2).float() / 255.0
    return F.interpolate(x, size=(FRAME, FRAME), mode="bilinear", align_corners=False)


class FrameVAE(nn.Module):
    """World Models' convolutional VAE for 64 x 64 RGB frames.

    Encoder: four 4 x 4 convolutions of stride 2 (32, 64, 128, 256 channels, ReLU) to a
    2 x 2 x 256 map, then linear layers to the mean and log-variance of :math:`z`. Decoder:
    a linear layer to 1024 values and four transposed convolutions (128, 64, 32, 3
    channels; kernels 5, 5, 6, 6) back to 64 x 64, a sigmoid at the end.

    Args:
        latent_size: The size of :math:`z` (the paper's 16).
    """

    def __init__(self, latent_size: int = LATENT_SIZE) -> None:
        super().__init__()
        self.latent_size = check_int("latent_size", latent_size, minimum=1, who="FrameVAE")
        self.encoder = nn.Sequential(
            nn.Conv2d(3, 32, 4, stride=2),
            nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2),
            nn.ReLU(),
            nn.Conv2d(64, 128, 4, stride=2),
            nn.ReLU(),
            nn.Conv2d(128, 256, 4, stride=2),
            nn.ReLU(),
            nn.Flatten(),
        )
        self.mu = nn.Linear(1024, latent_size)
        self.log_var = nn.Linear(1024, latent_size)
        self.expand = nn.Linear(latent_size, 1024)
        self.decoder = nn.Sequential(
            nn.ConvTranspose2d(1024, 128, 5, stride=2),
            nn.ReLU(),
            nn.ConvTranspose2d(128, 64, 5, stride=2),
            nn.ReLU(),
            nn.ConvTranspose2d(64, 32, 6, stride=2),
            nn.ReLU(),
            nn.ConvTranspose2d(32, 3, 6, stride=2),
            nn.Sigmoid(),
        )

    def _check(self, x: Tensor) -> None:
        if x.dim() != 4 or x.shape[1:] != (3, FRAME, FRAME) or not x.is_floating_point():
            raise ValueError(
                f"FrameVAE: x must be float frames (N, 3, {FRAME}, {FRAME}) in [0, 1] "
                f"(preprocess_frames makes them), got {tuple(x.shape)} {x.dtype}"
            )

    def encode(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """The mean and log-variance of :math:`q(z \\mid x)`."""
        self._check(x)
        h = self.encoder(x)
        mu: Tensor = self.mu(h)
        log_var: Tensor = self.log_var(h)
        return mu, log_var

    def decode(self, z: Tensor) -> Tensor:
        """Frames ``(N, 3, 64, 64)`` from latents ``(N, latent_size)``."""
        frames: Tensor = self.decoder(self.expand(z)[:, :, None, None])
        return frames

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """``(reconstruction, mu, log_var)``, with :math:`z` sampled by reparameterisation
        in training and the mean otherwise."""
        mu, log_var = self.encode(x)
        z = mu + torch.randn_like(mu) * torch.exp(0.5 * log_var) if self.training else mu
        return self.decode(z), mu, log_var

    def loss(self, x: Tensor, kl_tolerance: float = 0.5) -> Tensor:
        """World Models' loss (the module's formula), averaged over the batch."""
        recon: Tensor
        recon, mu, log_var = self(x)
        squared = (recon - x).square().flatten(1).sum(1)
        kl = 0.5 * (mu.square() + log_var.exp() - log_var - 1.0).sum(1)
        floor = torch.full_like(kl, kl_tolerance * self.latent_size)
        total: Tensor = (squared + torch.maximum(kl, floor)).mean()
        return total


ZOOM_STEPS = 50  # CarRacing's first frames zoom in from black: not kept


def collect_frames(
    frames: int, seed: int = 0, episode_steps: int = 200, env_id: str = ENV_ID
) -> np.ndarray:
    """``frames`` CarRacing frames ``(frames, 96, 96, 3)`` uint8 from random driving.

    Each episode drives with actions drawn around "forward": the steering uniform in
    ``[-1, 1]`` and held for a few steps, the gas mostly on, the brake mostly off, so the
    car covers track, grass and curves as a learning agent's would. The frames of the first
    ``ZOOM_STEPS`` steps (the opening zoom) are not kept; ``episode_steps`` are kept from
    each episode after them."""
    who = "collect_frames"
    frames = check_int("frames", frames, minimum=1, who=who)
    episode_steps = check_int("episode_steps", episode_steps, minimum=1, who=who)
    rng = np.random.default_rng(check_int("seed", seed, minimum=0, who=who))
    env = gym.make(env_id)
    out = np.empty((frames, 96, 96, 3), dtype=np.uint8)
    k, episode = 0, 0
    while k < frames:
        obs, _ = env.reset(seed=seed * 10_000 + episode)
        action = np.zeros(3, dtype=np.float32)
        for t in range(ZOOM_STEPS + episode_steps):
            if t % 5 == 0:
                action = np.array(
                    [rng.uniform(-1, 1), rng.uniform(0.3, 1.0), rng.uniform(0.0, 0.2)],
                    dtype=np.float32,
                )
            obs, _, terminated, truncated, _ = env.step(action)
            if t >= ZOOM_STEPS:
                out[k] = obs
                k += 1
            if k == frames or terminated or truncated:
                break
        episode += 1
    env.close()
    return out


def train_vae(
    frames: np.ndarray,
    epochs: int,
    batch_size: int = 64,
    learning_rate: float = 1e-3,
    seed: int = 0,
    latent_size: int = LATENT_SIZE,
) -> tuple[FrameVAE, list[float]]:
    """Fit a :class:`FrameVAE` on ``frames`` (uint8, ``(N, 96, 96, 3)``) with Adam; returns
    the model (in eval mode) and the mean loss of each epoch."""
    who = "train_vae"
    epochs = check_int("epochs", epochs, minimum=1, who=who)
    batch_size = check_int("batch_size", batch_size, minimum=1, who=who)
    learning_rate = check_float("learning_rate", learning_rate, minimum=0.0, open_low=True, who=who)
    data = preprocess_frames(frames)
    generator = torch.Generator().manual_seed(check_int("seed", seed, minimum=0, who=who))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        vae = FrameVAE(latent_size)
        optimizer = torch.optim.Adam(vae.parameters(), lr=learning_rate)
        losses = []
        for _ in range(epochs):
            order = torch.randperm(len(data), generator=generator)
            total = 0.0
            for start in range(0, len(data), batch_size):
                batch = data[order[start : start + batch_size]]
                loss = vae.loss(batch)
                optimizer.zero_grad()
                loss.backward()  # type: ignore[no-untyped-call]
                optimizer.step()
                total += float(loss.detach()) * len(batch)
            losses.append(total / len(data))
    return vae.eval(), losses


class LatentObservation(gym.ObservationWrapper[np.ndarray, Any, np.ndarray]):
    """CarRacing's frames as the VAE's mean latent :math:`\\mu(x)`, a flat Box of
    ``latent_size`` values; wrap it in ``ObservationalDropoutWrapper`` for the paper's
    agent."""

    def __init__(self, env: gym.Env[Any, Any], vae: FrameVAE) -> None:
        super().__init__(env)
        if not isinstance(vae, FrameVAE):
            raise TypeError(f"LatentObservation: vae must be a FrameVAE, got {type(vae).__name__}")
        self.vae = vae.eval()
        high = np.full(vae.latent_size, np.inf, dtype=np.float32)
        self.observation_space = spaces.Box(-high, high, dtype=np.float32)

    @torch.no_grad()
    def observation(self, observation: np.ndarray) -> np.ndarray:
        mu, _ = self.vae.encode(preprocess_frames(observation))
        return np.asarray(mu[0].numpy(), dtype=np.float32)
