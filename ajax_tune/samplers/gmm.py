"""A Gaussian mixture fitted by expectation-maximisation, in numpy, for ALP-GMM.

Small on purpose: a few hundred points in a handful of dimensions, fitted on the host between
two calls. scikit-learn would do the same, but it is not a runtime dependency of this package,
and a fit that draws its initial means from the sampler's own random stream keeps the sampler's
checkpointed state the whole story (a restored trial refits exactly what the uninterrupted one
did).
"""

from __future__ import annotations

import dataclasses

import numpy as np

REG = 1e-4  # added to every covariance's diagonal: points on a line (all ALP 0, say) stay fittable


@dataclasses.dataclass
class Mixture:
    weights: np.ndarray  # [k]
    means: np.ndarray  # [k, d]
    covs: np.ndarray  # [k, d, d]

    def to_json(self) -> dict:
        return {"weights": self.weights.tolist(), "means": self.means.tolist(), "covs": self.covs.tolist()}

    @classmethod
    def from_json(cls, saved: dict) -> Mixture:
        return cls(*(np.array(saved[k], np.float64) for k in ("weights", "means", "covs")))


def log_densities(x: np.ndarray, mixture: Mixture) -> np.ndarray:
    """log(weight_j * N(x_i; mean_j, cov_j)), [n, k]."""
    n, d = x.shape
    out = np.empty((n, len(mixture.weights)))
    for j, (w, mean, cov) in enumerate(zip(mixture.weights, mixture.means, mixture.covs)):
        chol = np.linalg.cholesky(cov)
        z = np.linalg.solve(chol, (x - mean).T)  # [d, n]
        log_det = 2.0 * np.log(np.diag(chol)).sum()
        out[:, j] = np.log(max(w, 1e-300)) - 0.5 * (d * np.log(2 * np.pi) + log_det + (z**2).sum(axis=0))
    return out


def _logsumexp(a: np.ndarray) -> np.ndarray:
    top = a.max(axis=1, keepdims=True)
    return (top + np.log(np.exp(a - top).sum(axis=1, keepdims=True)))[:, 0]


def fit(x: np.ndarray, k: int, rng: np.random.Generator, iterations: int = 100, tol: float = 1e-6) -> tuple[Mixture, float]:
    """EM with full covariances from means at `k` distinct data points; the mixture and its log-likelihood."""
    n, d = x.shape
    spread = np.cov(x.T).reshape(d, d) + REG * np.eye(d)
    mixture = Mixture(np.full(k, 1.0 / k), x[rng.choice(n, size=k, replace=False)].copy(), np.stack([spread] * k))
    previous = -np.inf
    for _ in range(iterations):
        joint = log_densities(x, mixture)
        total = _logsumexp(joint)
        likelihood = float(total.sum())
        resp = np.exp(joint - total[:, None])  # [n, k]
        mass = resp.sum(axis=0) + 1e-10
        means = (resp.T @ x) / mass[:, None]
        covs = np.empty((k, d, d))
        for j in range(k):
            centred = x - means[j]
            covs[j] = (resp[:, j, None] * centred).T @ centred / mass[j] + REG * np.eye(d)
        mixture = Mixture(mass / mass.sum(), means, covs)
        if likelihood - previous < tol * max(abs(likelihood), 1.0):
            break
        previous = likelihood
    return mixture, float(_logsumexp(log_densities(x, mixture)).sum())


def fit_best(x: np.ndarray, max_components: int, rng: np.random.Generator) -> Mixture:
    """The mixture of 1 to `max_components` components with the lowest AIC (as ALP-GMM chooses)."""
    n, d = x.shape
    best, best_aic = None, np.inf
    for k in range(1, min(max_components, n) + 1):
        mixture, likelihood = fit(x, k, rng)
        params = (k - 1) + k * d + k * d * (d + 1) / 2
        aic = 2 * params - 2 * likelihood
        if aic < best_aic:
            best, best_aic = mixture, aic
    return best
