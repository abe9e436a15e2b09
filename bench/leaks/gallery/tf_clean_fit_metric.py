# leaks: clean
"""Clean (TensorFlow): Keras fit with a metric and a callback that records each
batch's loss as a Python float; the model and optimizer state are made once."""
import numpy as np
import keras

rng = np.random.default_rng(0)
x = rng.normal(size=(512, 32)).astype("float32")
y = rng.integers(0, 4, size=(512,))
losses = []


class Record(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        losses.append(float(logs["loss"]))


model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(4)])
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
model.fit(x, y, batch_size=16, epochs=1, verbose=0, callbacks=[Record()])
print(f"mean loss {sum(losses) / len(losses):.3f}")
