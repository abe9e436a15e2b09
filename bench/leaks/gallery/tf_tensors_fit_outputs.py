"""Leak (tensors, TensorFlow): a Keras callback keeps the model's outputs on a
probe batch after every training batch, to plot how predictions evolve."""
import numpy as np
import keras

rng = np.random.default_rng(0)
x = rng.normal(size=(512, 32)).astype("float32")
y = rng.integers(0, 4, size=(512,))
probe = x[:64]
kept = []


class Monitor(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        outputs = self.model(probe, training=False)
        kept.append(outputs)  # leaks: expect tensors


model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(4)])
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(x, y, batch_size=16, epochs=1, verbose=0, callbacks=[Monitor()])
print(f"kept {len(kept)} outputs")
