"""The evaluation step of a small variational autoencoder on 28x28 images (the
`evaluate` of JAX's examples/mnist_vae.py, written here against any NumPy-like
module `m` and JAX-like random module `r`, so that fgrad and jax.jit run the
same program): the ELBO of 1,000 binarised test images under an MLP encoder and
decoder, plus 100 images sampled from the decoder and tiled by `image_grid`.
Random images stand in for MNIST (no download); only compile time is measured.
"""
import numpy as np

HIDDEN, LATENT, PIXELS = 512, 10, 28 * 28
TEST_IMAGES, GRID = 1000, 10


def image_grid(m, nrow, ncol, imagevecs, imshape):
    """Images (rows of `imagevecs`) tiled nrow x ncol, as the example does it."""
    images = iter(imagevecs.reshape((-1,) + imshape))
    return m.vstack([m.hstack([next(images).T for _ in range(ncol)][::-1])
                     for _ in range(nrow)]).T


def init_params(seed=0):
    """(encoder, decoder) weights: lists of (W, b) in float32."""
    rng = np.random.default_rng(seed)

    def dense(n_in, n_out):
        return ((rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(np.float32),
                np.zeros(n_out, np.float32))
    encoder = [dense(PIXELS, HIDDEN), dense(HIDDEN, HIDDEN), dense(HIDDEN, LATENT),
               dense(HIDDEN, LATENT)]
    decoder = [dense(LATENT, HIDDEN), dense(HIDDEN, HIDDEN), dense(HIDDEN, PIXELS)]
    return encoder, decoder


def test_images(seed=1):
    return np.random.default_rng(seed).random((TEST_IMAGES, PIXELS), dtype=np.float32)


def make_evaluate(m, r, softplus):
    """evaluate(params, images, key) -> (mean ELBO per image, tiled samples)."""
    def mlp(layers, h):
        for w, b in layers[:-1]:
            h = m.maximum(h @ w + b, 0.0)
        w, b = layers[-1]
        return h @ w + b

    def encode(encoder, x):
        h = x
        for w, b in encoder[:2]:
            h = m.maximum(h @ w + b, 0.0)
        (wm, bm), (ws, bs) = encoder[2:]
        return h @ wm + bm, softplus(h @ ws + bs)

    def elbo(key, params, x):
        encoder, decoder = params
        mean, var = encode(encoder, x)
        z = mean + m.sqrt(var) * r.normal(key, mean.shape)
        logits = mlp(decoder, z)
        log_likelihood = -m.sum(m.logaddexp(0.0, m.where(x, -1.0, 1.0) * logits))
        kl = -0.5 * m.sum(1.0 + m.log(var) - mean ** 2 - var)
        return log_likelihood - kl

    def sample_grid(key, decoder):
        code_key, pixel_key = r.split(key)
        logits = mlp(decoder, r.normal(code_key, (GRID * GRID, LATENT)))
        pixels = r.bernoulli(pixel_key, m.logaddexp(0.0, logits))
        return image_grid(m, GRID, GRID, pixels, (28, 28))

    def evaluate(params, images, key):
        elbo_key, data_key, image_key = r.split(key, 3)
        binarised = r.bernoulli(data_key, images)
        return (elbo(elbo_key, params, binarised) / images.shape[0],
                sample_grid(image_key, params[1]))
    return evaluate
