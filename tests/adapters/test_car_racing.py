"""CarRacing in the paper's latent space: our frames, our VAE, the latent observation that
the dropout wrapper and the policy take (issue 27, item 5, first step)."""

from __future__ import annotations

import importlib
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch
from sb3_contrib import RecurrentPPO

from paperports._imports import MissingExtraError
from paperports.adapters.car_racing import (
    LATENT_SIZE,
    FrameVAE,
    LatentObservation,
    collect_frames,
    preprocess_frames,
    train_vae,
)
from paperports.integrations.sb3 import ObservationalDropoutPolicy, ObservationalDropoutWrapper


@pytest.fixture(scope="module")
def frames() -> np.ndarray:
    return collect_frames(96, seed=0, episode_steps=48)


def test_frames_come_from_driving_the_real_environment(frames: np.ndarray) -> None:
    assert frames.shape == (96, 96, 96, 3) and frames.dtype == np.uint8
    assert len({frame.tobytes() for frame in frames}) > 90  # the car moves: frames differ
    again = collect_frames(96, seed=0, episode_steps=48)
    np.testing.assert_array_equal(again, frames)  # seeded


def test_the_vae_trains_on_our_frames(frames: np.ndarray) -> None:
    """The loss falls, seeded. (A test-sized set of 96 frames from two episodes does not
    yet reconstruct better than its mean frame, nor spread the latents; a VAE for the
    experiment trains on thousands of frames.)"""
    vae, losses = train_vae(frames, epochs=10, batch_size=32, seed=0)
    assert len(losses) == 10 and losses[-1] < 0.3 * losses[0]
    x = preprocess_frames(frames[:8])
    assert x.shape == (8, 3, 64, 64) and 0.0 <= float(x.min()) <= float(x.max()) <= 1.0
    with torch.no_grad():
        recon, mu, log_var = vae(x)
    assert recon.shape == x.shape and mu.shape == log_var.shape == (8, LATENT_SIZE)
    again, _ = train_vae(frames, epochs=10, batch_size=32, seed=0)
    with torch.no_grad():
        torch.testing.assert_close(again.encode(x)[0], mu)  # seeded


def test_the_latent_observation_feeds_the_papers_agent(frames: np.ndarray) -> None:
    vae, _ = train_vae(frames[:32], epochs=1, seed=0)
    latent = LatentObservation(gym.make("CarRacing-v3"), vae)
    obs, _ = latent.reset(seed=3)
    assert obs.shape == (LATENT_SIZE,) and latent.observation_space.contains(obs)
    frame, _ = gym.make("CarRacing-v3").reset(seed=3)  # the same first frame, unwrapped
    with torch.no_grad():
        expected = vae.encode(preprocess_frames(frame))[0][0]
    np.testing.assert_allclose(obs, expected.numpy(), rtol=1e-5, atol=1e-6)
    env = ObservationalDropoutWrapper(latent, 0.1)
    model = RecurrentPPO(
        ObservationalDropoutPolicy,
        env,
        n_steps=16,
        batch_size=16,
        n_epochs=1,
        seed=0,
        policy_kwargs={"world_model_kwargs": {"hidden_sizes": (10,), "residual": True}},
    )
    model.learn(16)
    action, _ = model.predict(env.reset(seed=0)[0], episode_start=np.array([True]))
    assert action.shape == (3,)


def test_bad_frames_are_refused() -> None:
    with pytest.raises(ValueError, match="uint8 RGB images"):
        preprocess_frames(np.zeros((2, 96, 96), np.uint8))
    with pytest.raises(ValueError, match="preprocess_frames"):
        FrameVAE()(torch.zeros(1, 3, 96, 96))
    with pytest.raises(TypeError, match="FrameVAE"):
        LatentObservation(gym.make("CarRacing-v3"), torch.nn.Linear(2, 2))  # type: ignore[arg-type]


def test_without_box2d_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "paperports.adapters.car_racing")
    monkeypatch.setitem(sys.modules, "Box2D", None)  # makes `import Box2D` fail
    with pytest.raises(MissingExtraError, match=r'pip install "paperports\[carracing\]"'):
        importlib.import_module("paperports.adapters.car_racing")
