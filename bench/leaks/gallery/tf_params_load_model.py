"""Leak (params, TensorFlow): a custom training loop reloads the saved model at
every step to score it, and keeps every copy it loaded."""
import os
import tempfile

import numpy as np
import tensorflow as tf
import keras

rng = np.random.default_rng(0)
x = rng.normal(size=(256, 32)).astype("float32")
y = rng.integers(0, 4, size=(256,))
model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(4)])
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
opt = keras.optimizers.SGD(0.01)
path = os.path.join(tempfile.mkdtemp(), "model.keras")
model.save(path)
scored = []
for step in range(16):
    xb, yb = x[step * 16:(step + 1) * 16], y[step * 16:(step + 1) * 16]
    with tf.GradientTape() as tape:
        loss = loss_fn(yb, model(xb, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    scored.append(keras.models.load_model(path))  # leaks: expect params
print(f"loaded {len(scored)} models")
